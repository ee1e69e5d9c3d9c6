#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Issue 27 part A, item 4: messages that name the fault, one exit status per class of
# mistake, each checked by its exact line.

load helpers

@test "stopped past the kill deadline, then continued: the watchdog's SIGKILL is said, once, never a negative time" {
	rlock_bg -t 3s -k st -- sh -c 'echo $$ > cmd.pid; sleep 60 & touch started; wait'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	# the watchdog kills the group by the lease's kill deadline while rlock stands still
	wait_until 20 pidfile_gone cmd.pid
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	# rlock learns of the loss (its clock, a refused renewal) before or after it reaps
	# the group: either way the watchdog's kill is what it says, not a signal it would
	# send now to a group already gone
	run cat "$RLOCK_ERR"
	refute_output --partial 'in -'
	refute_output --partial 'sending SIG'
	refute_output --partial 'still runs'
	assert_line --index 0 --regexp "^rlock: lock lost: .*the watchdog killed the command's process group before the lease could end.*$"
	assert_equal "$(grep -c 'lock lost' "$RLOCK_ERR")" 1
}

@test "durations take compound forms: 1m30s, 1h30m, 2h, 500ms" {
	run -0 rlock -t 1m30s -k d -c 'echo $RLOCK_TTL_MS'
	assert_output 90000
	run -0 rlock -t 1h30m -w 2h -k d -c 'echo $RLOCK_TTL_MS'
	assert_output 5400000
	run -0 rlock -t 500ms -k d -c 'echo $RLOCK_TTL_MS'
	assert_output 500
	run -64 --separate-stderr rlock -t 30m1h -k d -- true
	assert_equal "$stderr" "rlock: --ttl: bad duration '30m1h' (e.g. 500ms, 30s, 5m, 1h30m, 2h, 1d) (try 'rlock --help')"
}

@test "a file that cannot be read is 66 whichever option named it, one line, no --help hint" {
	run -66 --separate-stderr rlock --tls --cacert "$PWD/missing-ca.pem" -k f -- touch ran
	assert_equal "$stderr" "rlock: --cacert: cannot read '$PWD/missing-ca.pem': No such file or directory"
	run -66 --separate-stderr rlock --password-file "$PWD/missing-pw" -k f -- touch ran
	assert_equal "$stderr" "rlock: --password-file: cannot read password file '$PWD/missing-pw': No such file or directory"
	printf 'pw\n' >open-pw && chmod 644 open-pw
	run -66 --separate-stderr rlock --password-file "$PWD/open-pw" -k f -- touch ran
	assert_equal "$stderr" "rlock: --password-file: password file '$PWD/open-pw' holds a password and is accessible by others (mode 644); chmod o-rwx it"
	run -66 --separate-stderr rlock --config "$PWD/missing.conf" -k f -- touch ran
	assert_equal "$stderr" "rlock: cannot read config file '$PWD/missing.conf': No such file or directory"
	[[ ! -e ran ]]
}

@test "conflicting options (-n with -w): a usage error, one line" {
	run -64 --separate-stderr rlock -n -w 5s -k c -- touch ran
	assert_equal "$stderr" "rlock: --no-wait and --wait do not go together (try 'rlock --help')"
	run -64 --separate-stderr rlock --timeout 5s -n -k c -- touch ran
	assert_equal "$stderr" "rlock: --timeout and --no-wait do not go together (try 'rlock --help')"
	[[ ! -e ran ]]
	# the same option twice is no conflict: the last one wins, as for every option
	run -0 rlock -w 5s -w 1s -k c -- true
}

@test "the -v waiting line names the holder's --label, as the 'gave up' line does" {
	rlock_bg -k m --label build-42 -- "$HOLD" a
	wait_until 10 test -e a.started
	run -75 --separate-stderr rlock -v -w 300ms -k m -- touch ran
	touch a.release
	rlock_wait "$RLOCK_PID" 20
	assert_regex "$stderr" "rlock: lock 'm' is busy \(held by [^ ]+ pid [0-9]+ \[build-42\]\); waiting"
	assert_regex "$stderr" "rlock: lock 'm' is busy: held by [^ ]+ pid [0-9]+ \[build-42\] \(gave up waiting\)"
}

@test "--list says every duration in one family (29s, never 0m29s)" {
	rlock_bg -t 29s -k l -- "$HOLD" a
	wait_until 10 test -e a.started
	run -0 rlock --list
	touch a.release
	rlock_wait "$RLOCK_PID" 20
	assert_line --index 1 --regexp '^l +[^ ]+ +[0-9]+ +[0-9]+\.[0-9]s +[12][0-9]s +'
	refute_output --regexp ' 0m[0-9]'
}

@test "--insecure warns once on stderr (not under -q)" {
	local port
	port=$(dead_port)
	run -69 --separate-stderr rlock --tls --insecure -n -u "redis://127.0.0.1:$port" -k i -- true
	assert_equal "${stderr_lines[0]}" "rlock: --insecure: the server's certificate is not verified (anyone on the path can pose as the server)"
	assert_equal "$(grep -c insecure <<<"$stderr")" 1
	run -69 --separate-stderr rlock -q --tls --insecure -n -u "redis://127.0.0.1:$port" -k i -- true
	refute_regex "$stderr" "insecure"
}

@test "the keeper's log file lines carry the time and the keeper's pid" {
	local out
	out=$(rlock -k kl --acquire -v --log-file "$PWD/k.log")
	eval "$out"
	wait_until 10 grep -q 'holds rlock:{kl}' k.log
	run -0 rlock -k kl --release
	run cat k.log
	assert_line --index 0 --regexp '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4} rlock\[[0-9]+\]: keeper pid [0-9]+ holds rlock:\{kl\}'
}

@test "small truths (issue 38): --history of an unused name, a lock kept by --min-hold, --preempt of a holder that is not --preemptible, a quoted URL, a second --release" {
	# history is on by default: an unused name has none yet (not "turn it on")
	run -0 rlock -k never-used --history
	assert_output "rlock:{never-used}: no history yet (no run recorded under this name, or none within the retention)"
	# a lock kept by --min-hold: its command has ended
	run -0 rlock -k kept --min-hold 20s -- true
	run -75 --separate-stderr rlock -k kept -n -- true
	assert_regex "$stderr" "^rlock: lock 'kept' is busy: held by [^ ]+ pid [0-9]+, its command has ended \(kept by --min-hold for [0-9.]+s more\)$"
	# --preempt, -v, against a holder that did not agree to be preempted
	rlock_bg -k np -- "$HOLD" np
	local holder=$RLOCK_PID
	wait_until 10 test -e np.started
	run -75 --separate-stderr rlock -v -k np --preempt -w 300ms -- true
	assert_regex "$stderr" "lock 'np' is busy \(held by [^)]*\); waiting for its release: it is not --preemptible, so --preempt cannot stop it"
	touch np.release
	rlock_wait "$holder"
	# a URL in quotes in a config file: the quotes are named
	printf 'url = "redis://127.0.0.1:%s"\n' "$REDIS_PORT" >quoted.conf
	run -64 --separate-stderr rlock --config quoted.conf -k q -- true
	assert_regex "$stderr" 'the URL is in quotes \("\.\.\."\), which are not removed: in a config file, write url = redis://HOST:PORT without them'
	# a second --release: already released (the history says so), still 79
	eval "$(rlock -k rel --acquire)"
	run -0 rlock -k rel --release
	run -79 --separate-stderr rlock -k rel --release
	assert_regex "$stderr" "^rlock: lock 'rel' is not held by this token: it was already released at [0-9-]+ [0-9:]+ \(a --release before this one\); nothing released$"
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
}

@test "what a parser quotes from its input is escaped once, by the line that prints it" {
	run -64 --separate-stderr rlock -k e -w 'a\b' -- touch ran
	assert_equal "$stderr" "rlock: --wait: bad duration 'a\\x5cb' (e.g. 500ms, 30s, 5m, 1h30m, 2h, 1d) (try 'rlock --help')"
	run -64 --separate-stderr rlock -k e -w $'5\n' -- touch ran
	assert_equal "$stderr" "rlock: --wait: bad duration '5\\x0a' (e.g. 500ms, 30s, 5m, 1h30m, 2h, 1d) (try 'rlock --help')"
	run -64 --separate-stderr rlock -k e --warn $'TE\e[2JRM' -- touch ran
	assert_equal "$stderr" "rlock: --warn: 'TE\\x1b[2JRM' is not a signal name (or none) (try 'rlock --help')"
	printf 'a\\b c = 1\n' >esc.conf
	run -64 --separate-stderr rlock --config "$PWD/esc.conf" -k e -- touch ran
	assert_equal "$stderr" "rlock: $PWD/esc.conf:1: 'a\\x5cb ...' is not a setting (expected 'NAME = VALUE', one per line) (try 'rlock --help')"
	[[ ! -e ran ]]
}

@test "a name in a message is escaped once: a backslash or UTF-8 in a command or a config setting (not \\x5cx5c)" {
	run -127 --separate-stderr rlock -k e -- 'no\such'
	assert_equal "$stderr" 'rlock: no\x5csuch: command not found'
	run -127 --separate-stderr rlock -k e -- "$(printf 'h\303\251llo')"
	assert_equal "$stderr" 'rlock: h\xc3\xa9llo: command not found'
	printf 't\\tl = 5s\n' >esc.conf
	run -64 --separate-stderr rlock --config "$PWD/esc.conf" -k e -- touch ran
	assert_equal "$stderr" "rlock: $PWD/esc.conf:1: unknown setting 't\\x5c...' (try 'rlock --help')"
	printf 't\001tl = 5s\n' >esc.conf
	run -64 --separate-stderr rlock --config "$PWD/esc.conf" -k e -- touch ran
	assert_equal "$stderr" "rlock: $PWD/esc.conf:1: unknown setting 't\\x01...' (try 'rlock --help')"
	[[ ! -e ran ]]
	# a name that --break leaves closed by its --lock-delay
	rlock_bg --lock-delay 1m -k 'l\d' -- "$HOLD" a
	wait_until 10 test -e a.started
	run -0 --separate-stderr rlock -k 'l\d' --break
	assert_regex "$(grep 'stays closed' <<<"$stderr")" \
		'^rlock: rlock:\{l\\x5cd\} stays closed by --lock-delay for .* more .*; rlock -k l\\x5cd --reset opens it now$'
	touch a.release
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
}

@test "text another client wrote is shown, never obeyed: no CI runner command (##[, ##vso[, a row's ::) nor C1 or bidi control reaches text, stderr, JSON or --events" {
	# A holder record written by hand, as any client of the server can: its name starts
	# a --list row, its host and label hold GitHub's "##[" and Azure's "##vso[" (read
	# anywhere in a line of a job's log), a C1 CSI (U+009B) and a bidi override (U+202E).
	local k='rlock:{::warning::pwned}' now c1=$'\xc2\x9b' rlo=$'\xe2\x80\xae'
	local label="##vso[task.setvariable variable=PATH]/tmp/evil $rlo $c1 ##[add-mask]rlock"
	now=$(now_ms)
	rcli SET "$k" 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
	rcli HSET "$k:owner" pid 1 host 'h ##[error]x' user u cmd c label "$label" start "$now" \
		renewed "$now" ttl 60000 fence 7 proc x >/dev/null
	rcli PEXPIRE "$k:owner" 60000 >/dev/null
	local out
	for args in '--list' '--list --json' '-k ::warning::pwned --status' '-k ::warning::pwned --status --json'; do
		# shellcheck disable=SC2086 # the words of args
		run --separate-stderr rlock $args
		out=$output$stderr
		[[ $out != *'##'* && $out != *"$c1"* && $out != *"$rlo"* ]] ||
			fail "rlock $args: a command mark or a control, raw: $(cat -v <<<"$out")"
		! grep -qE '^ *::' <<<"$out" || fail "rlock $args: a row starts with '::': $out"
	done
	run -0 rlock --list
	[[ $output == *'\x3a:warning::pwned'*'h #\x23[error]x'*'[#\x23vso[task'* ]] || fail "$output"
	# JSON: the same text to a JSON reader
	run -0 rlock --list --json
	assert_equal "$(jq -r '.locks[0] | .name, .host, .label' <<<"$output")" \
		"$(printf '%s\n%s\n%s' '::warning::pwned' 'h ##[error]x' "$label")"
	# stderr (-v) and --events, of a run that finds it busy
	run -75 --separate-stderr rlock -v -n --events ev -k ::warning::pwned --label '##[error]own' -- touch ran
	[[ $stderr != *'##'* && $stderr == *'held by h #\x23[error]x'* ]] || fail "$(cat -v <<<"$stderr")"
	[[ $(cat ev) != *'##'* ]] || fail "$(cat ev)"
	assert_equal "$(jq -r .label ev | sort -u)" '##[error]own'
	[[ ! -e ran ]]
}

@test "a long text in a message is cut in the middle, and the cut shown ('...'): the end that says why stays" {
	local long ctl
	long=$(printf 'x%.0s' {1..3000})
	run -126 --separate-stderr rlock -k e -- "$long"
	assert_regex "$stderr" '^rlock: x{100,}\.\.\.x{100,}: File name too long$'
	# escaped, longer than a line holds: the path of a file that cannot be opened
	ctl=$(printf '\001%.0s' {1..900})
	run -0 --separate-stderr rlock -k e --events "none/$ctl" -- true
	assert_regex "$stderr" "^rlock: cannot write the events file '[^']*/none/(\\\\x01)+\\.\\.\\.(\\\\x01)+' \\(No such file or directory\\): the job goes on without it$"
	(( ${#stderr} <= 2048 )) || fail "a line of ${#stderr} bytes"
}

@test "a field another client wrote, longer than rlock keeps of it, shows its cut ('...') in text and JSON, never passed off as whole" {
	local long
	long=$(printf 'L%.0s' {1..3000})
	rlock -k f -- true
	rcli XADD 'rlock:{f}:history' '*' ev released fence 9 host h pid 12 label "$long" status 0 >/dev/null
	run -0 rlock -k f --history
	[[ ${lines[0]} == *'LLL...]  status 0' ]] || fail "${lines[0]}"
	run -0 rlock -k f --history --json
	[[ $(jq -r '.entries[0].label' <<<"$output") == LLL*'...' ]] || fail "$output"
	# a holder's record: --status and --list, text and JSON
	rcli SET 'rlock:{g}' 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
	rcli HSET 'rlock:{g}:owner' pid 1 host h user u cmd "c$long" label "$long" start "$(now_ms)" \
		renewed "$(now_ms)" ttl 60000 fence 7 proc x >/dev/null
	run rlock -k g --status
	[[ $output == *'command  cLLL'*'...'$'\n'*'label    LLL'*'...'$'\n'* ]] || fail "$output"
	run rlock -k g --status --json
	assert_equal "$(jq -r '.command[-3:], .label[-3:]' <<<"$output")" $'...\n...'
}

@test "tables measure their columns on the text they print (escaped): a wide host, name or event never shifts the columns after it; a token's cut never splits an escape" {
	# holder records written by hand, as any client can: a name and a host whose
	# escaped forms (\x01 is 4 columns) are wider than their columns
	local now k
	now=$(now_ms)
	for k in $'n\x01\x02\x03\x04\x05ame-wide' a b; do
		rcli SET "rlock:{$k}" 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
		rcli HSET "rlock:{$k}:owner" pid 12 host "$([[ $k == a ]] && echo $'w\x01\x02\x03ide-host.example' || echo short)" \
			user u cmd "cmd-$k" start "$now" renewed "$now" ttl 60000 fence 1 proc x >/dev/null
		rcli PEXPIRE "rlock:{$k}:owner" 60000 >/dev/null
	done
	run -0 rlock --list
	# every column starts where its header does, on every row
	local col head=${lines[0]} line
	for col in HOST PID HELD TTL RENEWED COMMAND; do
		local at=${head%%"$col"*}
		for line in "${lines[@]:1}"; do
			[[ ${line:${#at}-1:2} =~ ^\ [^\ ]$ ]] || fail "$col not at column ${#at}: $(printf '%s\n' "${lines[@]}")"
		done
	done
	[[ $output == *'w\x01\x02\x03ide-host.example 12 '* ]] || fail "$output"
	# --history: an event of another client's, wider than its column
	rlock -k hh -- true
	rcli XADD 'rlock:{hh}:history' '*' ev $'rel\x01\x02\x03eased' fence 9 host h pid 12 status 0 >/dev/null
	run -0 rlock -k hh --history
	local fence=${lines[0]%%fence*}
	for line in "${lines[@]}"; do
		[[ ${line:${#fence}:6} == 'fence ' ]] || fail "fence not at column ${#fence}: $output"
	done
	# --status: the last --break's token, cut after 16 bytes, where an escape begins
	rcli HSET 'rlock:{bk}:broken' host h pid 5 user u at "$(now_ms)" \
		tokens $'abcdefghijklmn\x01\x02zz' fence 7 >/dev/null
	rcli PEXPIRE 'rlock:{bk}:broken' 60000 >/dev/null
	run -0 rlock -k bk --status
	assert_line --regexp '^broken .*: token abcdefghijklmn\\x01\\x02\.\.\., fence 7$'
}
