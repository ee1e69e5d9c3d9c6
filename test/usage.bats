#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Command-line validation: bad input exits 64 with one "rlock:" line on stderr, before
# any network traffic; --help and --version.

load helpers

# usage_error ARGS...: rlock ARGS must exit 64, print nothing on stdout and exactly one
# line on stderr that starts with "rlock:". The command must not have run.
usage_error() {
	run -64 --separate-stderr rlock "$@"
	assert_equal "$output" ""
	if ((${#stderr_lines[@]} != 1)); then
		fail "expected exactly one line on stderr, got ${#stderr_lines[@]}: $stderr"
	fi
	assert_regex "${stderr_lines[0]}" '^rlock:'
	[[ ! -e ran ]] || fail "the command ran despite a usage error"
}

@test "unknown long option: 64, one line naming it" {
	usage_error --bogus-option -k u -- touch ran
	assert_regex "$stderr" 'bogus-option'
}

@test "an abbreviation that fits several options: 64, one line naming them (not 'unknown option')" {
	usage_error --ver -k u -- touch ran
	assert_equal "$stderr" "rlock: option '--ver' is ambiguous: --verbose or --version? (try 'rlock --help')"
	usage_error --pre=x -k u -- touch ran
	assert_equal "$stderr" "rlock: option '--pre' is ambiguous: --prefix, --preempt or --preemptible? (try 'rlock --help')"
	# one option's own aliases are no ambiguity: --nonb is --nonblock(ing), i.e. --no-wait
	run -0 rlock --nonb -k u -- true
	# an unambiguous abbreviation still works, as getopt_long takes it
	run -0 rlock --verb -k u -- true
}

@test "a value given as its own word that spells one of rlock's options (-k --wait 5s): 64 pointing at --key=, for every option that takes a value" {
	# the name forgotten: getopt took --wait for it and 5s for the command
	usage_error -k --wait 5s -- touch ran
	assert_equal "$stderr" "rlock: --key: '--wait' is one of rlock's options, not a value: was the NAME forgotten? (one so spelled: --key=--wait) (try 'rlock --help')"
	usage_error -k -n touch ran
	usage_error -k -- touch ran
	usage_error -k --wai 5s -- touch ran # an abbreviation getopt would take
	# every option of --help that takes a value
	local o n=0
	for o in $("$RLOCK" --help | grep -oE -- '^(  -[[:alnum:]], |      )--[a-z][a-z0-9-]* [^ ]+' |
		sed -E 's/^ +(-[[:alnum:]], )?//; s/ .*//'); do
		usage_error -k u "$o" --json -- touch ran
		[[ $stderr == *"one so spelled"* ]] || fail "$o --json: $stderr"
		n=$((n + 1))
	done
	((n > 30)) || fail "only $n options with a value in --help"
	# the value attached is the value; "-" and a negative number are values
	REDIS_URL=redis://127.0.0.1:$(dead_port) run -69 rlock --key=--wait -n -- touch ran
	REDIS_URL=redis://127.0.0.1:$(dead_port) run -69 rlock -k--wait -n -- touch ran
	REDIS_URL=redis://127.0.0.1:$(dead_port) run -69 rlock -k u --if-fence -5 --break
	run -0 --separate-stderr rlock -k u --events - -- true
	[[ ! -e ran ]]
}

@test "a command given to a mode that runs none: 64, the line names that mode" {
	local m
	for m in status break reset history; do
		usage_error -k u "--$m" -- touch ran
		assert_equal "$stderr" "rlock: no command is run with --$m (try 'rlock --help')"
		usage_error -k u "--$m" -c 'touch ran'
		assert_equal "$stderr" "rlock: no command is run with --$m (try 'rlock --help')"
	done
	usage_error --list -- touch ran
	assert_equal "$stderr" "rlock: no command is run with --list (try 'rlock --help')"
}

@test "--acquire --events - without --log-file: 64 (the keeper's lines would go to /dev/null)" {
	run -64 --separate-stderr rlock -k u --acquire --events -
	assert_equal "$output" "unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit 64)"
	assert_equal "$stderr" "rlock: --events -: the keeper of --acquire outlives this stderr (its own is /dev/null): give --events a file, or --log-file for its lines (try 'rlock --help')"
}

@test "unknown short option: 64" {
	usage_error -Z -k u -- touch ran
}

@test "missing -k: 64" {
	usage_error -- touch ran
}

@test "empty lock name: 64" {
	usage_error -k '' -- touch ran
}

@test "missing command: 64" {
	usage_error -k u
}

@test "option missing its argument: 64" {
	usage_error -k u --ttl
}

@test "bad --ttl duration: 64, one line naming the value" {
	usage_error -t 5x -k u -- touch ran
	assert_regex "$stderr" '5x'
}

@test "bad durations for --wait, --timeout, --kill-after, --min-hold: 64" {
	usage_error -w abc -k u -- touch ran
	assert_regex "$stderr" 'abc'
	usage_error --timeout 1y -k u -- touch ran
	assert_regex "$stderr" '1y'
	usage_error --kill-after=-3s -k u -- touch ran
	usage_error --min-hold 10qs -k u -- touch ran
	assert_regex "$stderr" '10qs'
	usage_error -t '' -k u -- touch ran
}

@test "bad --on-lost action: 64" {
	usage_error --on-lost sometimes -k u -- touch ran
	assert_regex "$stderr" 'sometimes'
	usage_error --on-lost SIGNOPE -k u -- touch ran
}

@test "bad --conflict-exit-code: 64" {
	usage_error -E abc -k u -- touch ran
	usage_error -E 256 -k u -- touch ran
	usage_error -E -1 -k u -- touch ran
}

@test "values at the edge of their range: the first one out is refused, naming the option" {
	# an accepted value gets as far as the next check ("no command to run"): no server
	local ok
	for ok in "-l 1" "-l 100000" "-E 0" "-E 255" "--wait-replicas 0" "--wait-replicas 1000" \
		"-t 100ms" "--connect-timeout 1ms" "--io-timeout 1ms" "--node-timeout 1ms" \
		"--kill-after 0" "--min-hold 0" "--max-hold 0" "-w 0"; do
		# shellcheck disable=SC2086 # an option and its value
		usage_error $ok -k u
		assert_equal "$stderr" "rlock: no command to run (try 'rlock --help')"
	done
	usage_error -l 0 -k u -- touch ran
	assert_regex "$stderr" '^rlock: --limit: '
	usage_error -l 100001 -k u -- touch ran
	assert_regex "$stderr" '^rlock: --limit: '
	usage_error --wait-replicas 1001 -k u -- touch ran
	assert_regex "$stderr" '^rlock: --wait-replicas: '
	usage_error -t 99ms -k u -- touch ran
	assert_equal "$stderr" "rlock: --ttl: the ttl must be at least 100ms, not '99ms' (try 'rlock --help')"
	local t
	for t in connect-timeout io-timeout node-timeout; do
		usage_error "--$t" 0 -k u -- touch ran
		assert_equal "$stderr" "rlock: --$t: must be more than 0 (try 'rlock --help')"
	done
	usage_error -k u --label "$(printf '%257s' '')" -- touch ran
	assert_equal "$stderr" "rlock: --label: at most 256 bytes (try 'rlock --help')"
	usage_error -k u --label "$(printf '%256s' '')"
	assert_equal "$stderr" "rlock: no command to run (try 'rlock --help')"
}

@test "bad input is one line, also where a warning or -v would have spoken first" {
	# a user without a password draws a warning; -v names the server: neither before
	# the one line that says what is wrong
	usage_error --user bob --status
	assert_regex "$stderr" 'needs -k NAME'
	usage_error -v --list -k u
	assert_regex "$stderr" 'takes no -k NAME'
	usage_error -v -u 'unix:///nowhere.sock,rediss://127.0.0.1:1' -k u -- touch ran
	assert_regex "$stderr" 'TLS over a Unix socket'
}

@test "bad URL on the command line: 64, one line naming the problem" {
	# (the line need not echo the whole URL: it may hold a password)
	usage_error -u 'http://127.0.0.1:6379' -k u -- touch ran
	assert_regex "$stderr" 'http'
	assert_regex "$stderr" '(url|URL)'
	usage_error -u 'redis://127.0.0.1:99999' -k u -- touch ran
	usage_error -u 'redis://127.0.0.1:12ab' -k u -- touch ran
	usage_error -u 'redis://[::1' -k u -- touch ran
}

@test "bad URL from RLOCK_URL or REDIS_URL: 64" {
	RLOCK_URL='nope://x' usage_error -k u -- touch ran
	REDIS_URL='nope://y' usage_error -k u -- touch ran
}

@test "usage errors win over an unreachable server (validated before connecting)" {
	local port
	port=$(dead_port)
	usage_error -u "redis://127.0.0.1:$port" -t 5x -k u -- touch ran
}

@test "URL precedence: --url, then RLOCK_URL, then REDIS_URL" {
	local port good=$REDIS_URL
	port=$(dead_port)
	# --url beats both environment variables
	RLOCK_URL="redis://127.0.0.1:$port" REDIS_URL="redis://127.0.0.1:$port" \
		run -0 rlock -u "$good" -k u -- true
	# RLOCK_URL beats REDIS_URL
	RLOCK_URL="$good" REDIS_URL="redis://127.0.0.1:$port" run -0 rlock -k u -- true
	RLOCK_URL="redis://127.0.0.1:$port" run -69 rlock -n -k u -- touch ran
	[[ ! -e ran ]]
	# REDIS_URL alone
	run -0 rlock -k u -- true
}

@test "default URL is redis://127.0.0.1:6379" {
	# In a network namespace of its own (only a loopback, nothing listening), so that
	# a redis-server on this machine's port 6379 changes nothing.
	require_tool unshare ip
	unshare -n true 2>/dev/null || ci_skip "no network namespaces here (unshare -n)"
	run -69 --separate-stderr unshare -n sh -c 'ip link set lo up && exec env -u REDIS_URL "$0" -n -k u -- touch ran' "$RLOCK"
	assert_regex "$stderr" '127\.0\.0\.1:6379'
	[[ ! -e ran ]]
}

@test "durations: ms, s, m, h, d, bare and fractional seconds are accepted" {
	run -0 rlock -t 500ms -k u -- true
	run -0 rlock -t 30s -k u -- true
	run -0 rlock -t 5m -k u -- true
	run -0 rlock -t 2h -k u -- true
	run -0 rlock -t 1d -k u -- true
	run -0 rlock -t 3 -k u -- true
	run -0 rlock -t 1.5 -k u -- true
	run -0 rlock -w 0.25 -k u -- true
	run -0 rlock --timeout 2s --kill-after 1s --min-hold 0 -k u -- true
	run -0 rlock -t 1.5 -k u -- sh -c 'echo "$RLOCK_TTL_MS"'
	assert_output 1500
	run -0 rlock -t 500ms -k u -- sh -c 'echo "$RLOCK_TTL_MS"'
	assert_output 500
	run -0 rlock -t 2m -k u -- sh -c 'echo "$RLOCK_TTL_MS"'
	assert_output 120000
}

@test "long options with = and separate argument forms" {
	run -0 rlock --key=u --ttl=10s --wait=1s --prefix=p: -- true
	run -0 rlock --key u --ttl 10s --wait 1s --prefix p: -- true
}

@test "options after the command belong to the command (no permutation)" {
	run -0 rlock -k u printf '%s\n' -n --ttl 5x
	assert_output $'-n\n--ttl\n5x'
	run -0 rlock -k u -- printf '%s\n' -k
	assert_output -- '-k'
}

@test "-q and repeated -v are accepted; quiet on success" {
	run -0 --separate-stderr rlock -q -k u -- true
	assert_equal "$stderr" ""
	run -0 --separate-stderr rlock -k u -- true
	assert_equal "$stderr" ""
	run -0 rlock -v -v -k u -- true
	run -0 rlock -vv -k u -- true
}

@test "--help: exit 0, usage and the exit-status table" {
	run -0 rlock --help
	assert_output --partial 'Usage'
	assert_output --partial '--key'
	assert_output --partial '--no-wait'
	assert_output --partial '--on-lost'
	local code
	for code in 64 69 70 71 74 75 79 126 127; do
		grep -Eq "(^|[^0-9])$code([^0-9]|$)" <<<"$output" ||
			fail "--help does not mention exit status $code"
	done
	run -0 rlock -h
	assert_output --partial '--key'
}

@test "--version: exit 0, names the version, hiredis and OpenSSL" {
	run -0 rlock --version
	assert_regex "$output" '[0-9]+\.[0-9]+\.[0-9]+'
	grep -qi hiredis <<<"$output" || fail "--version does not name hiredis: $output"
	grep -qi openssl <<<"$output" || fail "--version does not name OpenSSL: $output"
	run -0 rlock -V
	grep -qi hiredis <<<"$output"
}

@test "--help and --version need no server" {
	local port
	port=$(dead_port)
	REDIS_URL="redis://127.0.0.1:$port" run -0 rlock --help
	REDIS_URL="redis://127.0.0.1:$port" run -0 rlock --version
}

@test "--history --help says what -n is there: its count, not 'fail at once'" {
	run -0 rlock --history --help
	assert_output --regexp '-n, --no-wait +with --history, -n N: the last N records'
	refute_output --partial 'fail at once'
	run -0 rlock --status --help
	assert_output --partial 'fail at once when the lock is busy'
}

# ---------------------------------------------------------------------------------
# issue 7 items 10, 13, 15; issue 14 item 16

@test "-x / --exclusive are accepted (flock habit; the default)" {
	run -0 rlock -x -k u -- echo ran
	assert_output ran
	run -0 rlock --exclusive -k u -- echo ran
	assert_output ran
}

@test "contradictory operator modes are refused: --status --break, --status --list, --list -k" {
	usage_error -k u --status --break
	assert_regex "$stderr" -- '--status and --break do not go together'
	usage_error -k u --break --status
	usage_error -k u --status --list
	assert_regex "$stderr" -- '--status and --list do not go together'
	usage_error --list -k a
	assert_regex "$stderr" -- '--list .*no -k NAME'
	# the same mode twice is fine
	run -0 rlock -k u --status --status
}

@test "an option the mode cannot act on is refused from the command line, read quietly from a config file" {
	# a preempted holder must stop its command and give the lock to the request at once
	usage_error --preemptible --on-lost ignore -k u -- touch ran
	assert_regex "$stderr" -- '--preemptible .*not with --on-lost ignore'
	usage_error --preemptible --min-hold 1s -k u -- touch ran
	assert_regex "$stderr" -- '--preemptible .*not with --min-hold'
	# --acquire and --release run no command (github format: no sh lines on stdout)
	usage_error -k u --acquire --format github --min-hold 1s
	assert_regex "$stderr" -- '--min-hold goes with a command, not with --acquire'
	usage_error -k u --release --token 0123456789abcdef0123456789abcdef --min-hold 1s
	assert_regex "$stderr" -- '--min-hold goes with a command, not with --release'
	usage_error -k u --acquire --format github --on-lost kill
	assert_regex "$stderr" -- '--on-lost acts on a command'
	usage_error -k u --acquire --format github --kill-after 1s
	assert_regex "$stderr" -- '--kill-after acts on a command'
	# the same settings in a config file serve the runs that read them: no refusal
	printf 'min-hold = 1s\non-lost = kill\nkill-after = 2s\n' >cfg
	chmod 600 cfg
	run -0 --separate-stderr env RLOCK_CONFIG="$PWD/cfg" "$RLOCK" -k cfgk --acquire --format github
	local token
	token=$(sed -n 's/^RLOCK_TOKEN=//p' <<<"$output")
	[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "no token in: $output"
	run -0 env RLOCK_CONFIG="$PWD/cfg" "$RLOCK" -k cfgk --release --token "$token"
	# a fleet's min-hold gives way to a preemptible run's hand-over: not refused
	run -0 env RLOCK_CONFIG="$PWD/cfg" "$RLOCK" -k cfgp --preemptible -- touch ran
	[[ -e ran ]]
}

@test "-u HOST:PORT gets a hint to write redis://HOST:PORT" {
	usage_error -u 127.0.0.1:6379 -k u -- touch ran
	assert_regex "$stderr" 'write redis://HOST:PORT'
	usage_error -u localhost -k u -- touch ran
	assert_regex "$stderr" 'write redis://HOST:PORT'
}

@test "with stdout and stderr closed, rlock's messages do not go into the Redis socket (regression, issue 7.10)" {
	# A waiter's -v "busy; waiting" line is written after the connection is open: with
	# fds 1 and 2 closed, the socket took fd 2 and the line went to the server.
	rlock_bg -k b -t 20s -- "$HOLD" first
	local holder=$RLOCK_PID
	wait_until 30 test -e first.started
	bash -c '"$RLOCK" -v -k b -w 15s -- touch ran >&- 2>&-; echo $? >waiter.status' 3>&- 4>&- &
	track_pid $!
	# until it waits (listens for the release) or has already given up
	waiting_or_done() {
		[[ -s waiter.status || $(waiters b) -ge 1 ]]
	}
	wait_until 30 waiting_or_done
	touch first.release
	rlock_wait "$holder"
	wait_until 20 test -s waiter.status
	assert_equal "$(cat waiter.status)" 0
	[[ -e ran ]] || fail "the command did not run"
	# and a plain run with every standard fd closed
	rm ran
	run -0 bash -c '"$RLOCK" -v -k u -- touch ran <&- >&- 2>&-'
	[[ -e ran ]]
}

# ---------------------------------------------------------------------------------
# bad input at the class: every option that takes a value, read from --help's table
# (help_options, helpers.bash: a new option is walked without editing this), fed the
# values no option of its kind takes (bad_values)

@test "every option with a value: a bad value is one line naming the option, 64, no server asked (walks --help)" {
	# no server: a value let through would end in 69 (or in "no command to run")
	local port
	port=$(dead_port)
	export REDIS_URL="redis://127.0.0.1:$port"
	local opt arg v n=0 st
	local -a lines
	while read -r opt arg; do
		bad_values "$opt" "$arg" >/dev/null || fail "$opt $arg: a kind of value bad_values does not know"
		local -a bad=()
		mapfile -t bad < <(bad_values "$opt" "$arg")
		for v in "${bad[@]}"; do
			n=$((n + 1))
			"$RLOCK" "$opt" "$v" -k u >out 2>err && st=0 || st=$?
			# (not bats' run: some hundred values, in the asan pass too)
			mapfile -t lines <err
			if ((st != 64)) || [[ -s out || ${#lines[@]} -ne 1 || ${lines[0]} != "rlock: $opt"* ]]; then
				fail "$opt $(printf %q "$v"): status $st, stderr: $(cat err)"
			fi
		done
	done < <(help_options)
	((n > 100)) || fail "only $n values tried: is --help's table read?"
}

@test "an option only one mode reads, given to another on the command line: 64 (--log-file, --format, as --token)" {
	usage_error --log-file log -k u -- touch ran
	assert_equal "$stderr" "rlock: --log-file goes with --acquire (try 'rlock --help')"
	usage_error --format sh -k u -- touch ran
	assert_equal "$stderr" "rlock: --format goes with --acquire (try 'rlock --help')"
	[[ ! -e log ]]
}

@test "what acts on a command, given to a mode that runs none: 64 (every such mode, every such option)" {
	local m o tok=0123456789abcdef0123456789abcdef
	local -a k
	for m in status list break reset history check held release; do
		for o in max-hold min-hold on-lost kill-after warn; do
			local -a val=(1s)
			[[ $o == on-lost ]] && val=(kill)
			[[ $o == warn ]] && val=(USR1)
			k=(-k u)
			[[ $m == @(list|check) ]] && k=()
			[[ $m == @(held|release) ]] && k+=(--token "$tok")
			usage_error "${k[@]}" "--$m" "--$o" "${val[@]}"
			[[ $o == min-hold && $m == release ]] && continue # its own line (above)
			assert_equal "$stderr" "rlock: --$o acts on a command: --$m runs none (try 'rlock --help')"
		done
	done
}

# mode_reads MODE: what MODE reads of the options of --help's Lock, Across steps, Events and
# Operator sections (and --wait-replicas, --wait-aof), given on its command line, one
# line "MODE: opt opt ..."; an option it refuses (64, its line naming it) is left out.
# A 64 whose line does not name the option fails the walk.
mode_reads() {
	local m=$1 ov o a st tok=0123456789abcdef0123456789abcdef reads=
	local -a v k
	local mhelp listed
	mhelp=$("$RLOCK" "--$m" --help)
	for ov in $("$RLOCK" --help | sed -n '/^Lock:/,/^Server:/p; /^Across steps/,/^Durations/p' |
		grep -E '^  (-[a-zA-Z], |    )--[a-z]' | sed -E 's/^ +//; s/^-[a-zA-Z], //' |
		awk '{ print $1 ($2 ~ /^[A-Z][][A-Z,]*$/ ? "=" $2 : "") }') --wait-replicas=N --wait-aof=L[,R]; do
		o=${ov%%=*} a=
		[[ $ov == *=* ]] && a=${ov#*=}
		case ${o#--} in key | command | config | help | version | acquire | release | held | status | break | reset | history | list | check) continue ;; esac
		case $a in
		'') v=() ;;
		DUR) v=(1s) ;;
		N) v=(1) ;;
		TOKEN) v=("$tok") ;;
		ACTION) v=(kill) ;;
		SIGNAL) v=(USR1) ;;
		FMT) v=(sh) ;;
		'L[,R]') v=(1) ;;
		FILE | PATH) v=("$BATS_TEST_TMPDIR/f") ;;
		*) v=(x) ;;
		esac
		[[ $m == history && $o == --no-wait ]] && v=(5) # --history -n N: the count
		k=(-k u)
		[[ $m == @(list|check) ]] && k=()
		[[ $m == @(held|release) ]] && k+=(--token "$tok")
		"$RLOCK" "${k[@]}" "--$m" "$o" "${v[@]}" >/dev/null 2>err && st=0 || st=$?
		if ((st != 64)); then
			reads+=" ${o#--}"
		elif ! grep -qE -- "^rlock: .*$o\b" err; then
			echo "$m $o: 64 without naming it: $(cat err)"
			return 1
		fi
		# rlock --MODE --help (what the completions are drawn from) says the same
		listed=0
		grep -qE -- "^(  -[[:alnum:]], |      )$o( |$)" <<<"$mhelp" && listed=1
		if (((st != 64) != listed)); then
			echo "$m $o: exit $st, but rlock --$m --help $( ((listed)) && echo lists || echo lacks) it"
			return 1
		fi
	done
	echo "$m:$reads"
}

@test "every operator mode x every option: what the mode does not read is refused from the command line (64), quiet from a config file (walks --help)" {
	# no server: what is read ends in 69 (or 79, 2), never 64
	REDIS_URL="redis://127.0.0.1:$(dead_port)"
	export REDIS_URL RLOCK_URL=$REDIS_URL
	local m got
	local -A want=(
		[status]='prefix no-wait conflict-exit-code json verbose quiet'
		[break]='prefix no-wait label token if-fence verbose quiet'
		[reset]='prefix no-wait label verbose quiet'
		[history]='prefix no-wait json verbose quiet'
		[list]='prefix no-wait wait timeout json verbose quiet'
		[check]='prefix no-wait json verbose quiet wait-replicas wait-aof'
		[held]='prefix no-wait token json verbose quiet'
		[release]='prefix exclusive shared limit fair no-wait wait timeout ttl once-per label token events metrics-file verbose quiet wait-replicas wait-aof'
	)
	for m in status break reset history list check held release; do
		got=$(mode_reads "$m") || fail "$got"
		assert_equal "$got" "$m: ${want[$m]}"
	done
	# the same settings in a config file serve the runs that read them: no refusal
	printf 'ttl = 5s\nlock-delay = 1s\nonce-per = 1h\nwait-aof = 1\nconflict-exit-code = 3\nmax-hold = 1s\n' >cfg
	chmod 600 cfg
	for m in status break reset history; do
		run -69 env RLOCK_CONFIG="$PWD/cfg" "$RLOCK" -k u "--$m"
	done
	run -69 env RLOCK_CONFIG="$PWD/cfg" "$RLOCK" --list
}

@test "--events, --metrics-file with a mode that makes no run: 64 (--release's release is an event); a bad path has the usage shape" {
	local m o
	local -a k
	for m in status list break reset history check held; do
		for o in events metrics-file; do
			k=(-k u)
			[[ $m == @(list|check) ]] && k=()
			[[ $m == held ]] && k+=(--token 0123456789abcdef0123456789abcdef)
			usage_error "${k[@]}" "--$m" "--$o" rec
			assert_equal "$stderr" "rlock: --$o records a run: --$m makes none (try 'rlock --help')"
		done
	done
	[[ ! -e rec ]]
	usage_error -k u --metrics-file - -- touch ran
	assert_equal "$stderr" "rlock: --metrics-file: '-': not a usable path (try 'rlock --help')"
}

@test "--node-timeout with one server: 64 (Redlock only, as --wait-replicas is refused with Redlock)" {
	usage_error -k u --node-timeout 1s -- touch ran
	assert_equal "$stderr" "rlock: --node-timeout applies to Redlock (several --url), not to one server (try 'rlock --help')"
	usage_error --check --node-timeout 1s
	# with several URLs it is read (a dead port each: no quorum, 69)
	local p1 p2 p3
	p1=$(dead_port) p2=$(dead_port) p3=$(dead_port)
	run -69 rlock -n -u "redis://127.0.0.1:$p1,redis://127.0.0.1:$p2,redis://127.0.0.1:$p3" \
		--node-timeout 100ms -k u -- touch ran
	[[ ! -e ran ]]
}

@test "--held: bad input has the usage shape (points to --help), as every other usage error" {
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_KEYS
	usage_error --held
	assert_regex "$stderr" "^rlock: --held needs a lock: .* \(try 'rlock --help'\)$"
	RLOCK_KEY=junk RLOCK_TOKEN=0123456789abcdef0123456789abcdef usage_error --held
	assert_regex "$stderr" "is not an rlock key \(try 'rlock --help'\)$"
}

@test "an option given twice: the last counts (as flock and timeout); two kinds or two modes that differ: 64" {
	run -0 rlock -t 1s -t 2s --prefix a: --prefix b: -k u -c 'echo "$RLOCK_TTL_MS $RLOCK_KEY"'
	assert_output '2000 b:{u}'
	run -0 rlock -l 3 -l 2 -k u -c 'echo "$RLOCK_TTL_MS"'
	usage_error -x -s -k u -- touch ran
	usage_error -l 2 -s -k u -- touch ran
	usage_error -k u --status --reset
}
