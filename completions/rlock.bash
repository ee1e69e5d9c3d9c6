# SPDX-License-Identifier: MIT
# bash completion for rlock(1)                                  -*- shell-script -*-
# Installed as share/bash-completion/completions/rlock (loaded on demand by
# bash-completion); it also works when sourced on its own, without bash-completion.
# shellcheck shell=bash

# Options that take a value (the next word, or --opt=value).
_rlock_opts_with_arg='-k --key --prefix -w --wait --timeout -E --conflict-exit-code
-t --ttl --on-lost --warn --kill-after --min-hold --once-per --lock-delay --max-hold -l --limit -c --command -u --url --user
--password-file --cacert --cacertdir --cert --tls-key --sni --connect-timeout
--io-timeout --node-timeout --wait-replicas --wait-aof --config --sentinel-user --sentinel-password-file --format --log-file --token --label'

_rlock_long_opts='--key --prefix --exclusive --shared --limit --fair --no-wait --nb --nonblock --nonblocking --wait --timeout --conflict-exit-code --ttl
--on-lost --warn --kill-after --min-hold --once-per --lock-delay --max-hold --command --url --user --password-file --tls
--cacert --cacertdir --cert --tls-key --sni --insecure --connect-timeout --io-timeout
--node-timeout --wait-replicas --wait-aof --config --verbose --quiet --json --status --break --list --help
--version --sentinel-user --sentinel-password-file --acquire --release --held --format --log-file --token --label'
_rlock_long_opts+=' --check'
_rlock_short_opts='-k -x -s -l -n -w -E -t -c -u -v -q -h -V'
# Deploy queues (--supersede, --preempt, --preemptible) and --history
_rlock_opts_with_arg+=' --superseded-exit-code'
_rlock_long_opts+=' --supersede --superseded-exit-code --preempt --preemptible --history'
# --break's compare-and-break (issue 27)
_rlock_opts_with_arg+=' --if-fence'
_rlock_long_opts+=' --if-fence'
# --reset: clear a name's marks (issue 38)
_rlock_long_opts+=' --reset'
# Events and metrics (docs/operations.md).
_rlock_opts_with_arg+=' --events --metrics-file'
_rlock_long_opts+=' --events --metrics-file'

_rlock_takes_arg() {
	local o
	for o in $_rlock_opts_with_arg; do
		[[ $1 == "$o" ]] && return 0
	done
	return 1
}

# Lock names held on the server the command line points at; nothing (quietly) when
# rlock is missing, the server is unreachable or it takes more than a second.
_rlock_lock_names() {
	local -a server=()
	local i w
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--) break ;;
		-u | --url | --prefix | --config | --user | --password-file | --cacert | \
			--cacertdir | --cert | --tls-key | --sni | --connect-timeout | \
			--sentinel-user | --sentinel-password-file)
			((i + 1 < COMP_CWORD)) && server+=("$w" "${COMP_WORDS[i + 1]}")
			((i++))
			;;
		--url=* | --prefix=* | --config=* | --user=* | --password-file=* | \
			--cacert=* | --cacertdir=* | --cert=* | --tls-key=* | --sni=* | \
			--sentinel-user=* | --sentinel-password-file=*)
			server+=("$w")
			;;
		--tls | --insecure) server+=("$w") ;;
		esac
	done
	command -v "${COMP_WORDS[0]:-rlock}" >/dev/null 2>&1 || return 0
	# Text output: one lock per line, the name (or the full key PREFIX{NAME}) first.
	timeout 1 "${COMP_WORDS[0]:-rlock}" "${server[@]}" -q --list 2>/dev/null </dev/null |
		while read -r w _; do
			case $w in
			*\{*\}*) w=${w#*\{} w=${w%\}*} ;;
			NAME | KEY | LOCK | '') continue ;;
			esac
			printf '%s\n' "$w"
		done
}

# COMPREPLY = the lines of $1 that start with $2. No compgen -W: it would expand
# $(...) in lock names that come from the server.
_rlock_compreply_words() {
	local w
	COMPREPLY=()
	while IFS= read -r w; do
		[[ -n $w && $w == "$2"* ]] && COMPREPLY+=("$w")
	done <<<"${1//[[:space:]]/$'\n'}"
}

_rlock_files() { # $1: -f for files, -d for directories
	if declare -F _filedir >/dev/null 2>&1; then
		if [[ $1 == -d ]]; then _filedir -d; else _filedir; fi
	else
		mapfile -t COMPREPLY < <(compgen "$1" -- "$cur")
	fi
}

_rlock() {
	local cur prev i w cmd_start=0
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	# COMP_WORDBREAKS splits "--ttl=5s" into "--ttl" "=" "5s".
	if [[ $cur == = ]]; then
		cur=
	elif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == --*=* ]]; then
		prev=${cur%%=*}
		cur=${cur#*=}
	else
		# Where does the wrapped command start? After "--", or at the first word that
		# is not an option or its value, the word being completed included
		# (rlock -k x sle<TAB>), as in zsh and fish.
		for ((i = 1; i <= COMP_CWORD; i++)); do
			w=${COMP_WORDS[i]}
			if ((i == COMP_CWORD)); then
				[[ $w != -* ]] && cmd_start=$i
				break
			elif [[ $w == -- ]]; then
				cmd_start=$((i + 1))
				break
			elif [[ ${COMP_WORDS[i + 1]} == = ]]; then
				((i += 2))
			elif _rlock_takes_arg "$w"; then
				((i++))
			elif [[ $w != -* ]]; then
				cmd_start=$i
				break
			fi
		done
		if ((cmd_start > 0 && cmd_start <= COMP_CWORD)); then
			if declare -F _command_offset >/dev/null 2>&1; then
				_command_offset "$cmd_start"
			elif ((cmd_start == COMP_CWORD)); then
				mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
			else
				_rlock_files -f
			fi
			return 0
		fi
		prev=${COMP_WORDS[COMP_CWORD - 1]}
		[[ $cur == -* ]] && prev=
	fi

	case $prev in
	-k | --key)
		_rlock_compreply_words "$(_rlock_lock_names)" "$cur"
		return 0
		;;
	-w | --wait | --timeout | -t | --ttl | --kill-after | --min-hold | --once-per | --lock-delay | --max-hold | \
		--connect-timeout | --io-timeout | --node-timeout)
		_rlock_compreply_words $'500ms\n5s\n30s\n5m' "$cur"
		return 0
		;;
	--format)
		_rlock_compreply_words $'sh\ngithub' "$cur"
		return 0
		;;
	--superseded-exit-code)
		_rlock_compreply_words $'0\n80' "$cur"
		return 0
		;;
	--warn)
		_rlock_compreply_words $'USR1\nUSR2\nHUP\nINT\nTERM\nnone' "$cur"
		return 0
		;;
	--on-lost)
		_rlock_compreply_words $'term\nkill\nignore\nHUP\nINT\nQUIT\nUSR1\nUSR2\nTERM\nKILL' "$cur"
		return 0
		;;
	--config | --password-file | --cacert | --cert | --tls-key | --sentinel-password-file)
		_rlock_files -f
		return 0
		;;
	--cacertdir)
		_rlock_files -d
		return 0
		;;
	--events | --metrics-file)
		_rlock_files -f
		return 0
		;;
	-u | --url)
		compopt -o nospace 2>/dev/null
		_rlock_compreply_words $'redis://\nrediss://\nunix:///\nredis-sentinel://\nrediss-sentinel://' "$cur"
		return 0
		;;
	-E | --conflict-exit-code)
		_rlock_compreply_words $'0\n75' "$cur"
		return 0
		;;
	--wait-replicas)
		_rlock_compreply_words $'1\n2' "$cur"
		return 0
		;;
	--wait-aof)
		_rlock_compreply_words $'1\n1,1\n0,1' "$cur"
		return 0
		;;
	--prefix | --user | --sni | -c | --command)
		return 0
		;;
	esac

	if [[ $cur == --* || -z $cur ]]; then
		_rlock_compreply_words "$_rlock_long_opts" "$cur"
	elif [[ $cur == -* ]]; then
		_rlock_compreply_words "$_rlock_short_opts"$'\n'"$_rlock_long_opts" "$cur"
	fi
	return 0
}

complete -F _rlock rlock
