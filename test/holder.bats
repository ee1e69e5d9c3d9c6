#!/usr/bin/env bats
# One holder formatter (src/store/holder.c): --list and --status print a holder's fields
# whole, escaped, from the same text.

load helpers

setup_file() {
	rlock_require_binary
	redis_start
}

@test "--list and --status show a long command whole, the same in both" {
	local long
	long=$(printf 'x%.0s' {1..350})
	rlock_bg -t 20s -k one -- "$HOLD" one 0 "$long"
	local pid=$RLOCK_PID
	wait_until 30 test -e "$BATS_TEST_TMPDIR/one.started"
	track_pidfile "$BATS_TEST_TMPDIR/one.pid"
	run -0 rlock --list
	assert_line --regexp "^one +$(hostname) +$pid +[0-9].* +$HOLD one 0 $long\$"
	run -75 rlock --status -k one
	assert_line "  command  $HOLD one 0 $long"
	touch one.release
	rlock_wait "$pid"
}

@test "a --limit whose stored count is not a number: --status and --list print it escaped, and null in JSON" {
	# PREFIX{NAME}:limit is plain Redis data that any client can set: read back, it must
	# neither break the JSON (it was written there raw) nor reach the terminal raw.
	rlock_bg -t 20s -k sem -l 3 -- "$HOLD" sem 0
	local pid=$RLOCK_PID
	wait_until 30 test -e "$BATS_TEST_TMPDIR/sem.started"
	track_pidfile "$BATS_TEST_TMPDIR/sem.pid"
	rcli SET 'rlock:{sem}:limit' $'3\e[2J,"injected":true,"x":1' KEEPTTL >/dev/null
	run -75 --separate-stderr rlock --status -k sem --json
	assert_equal "$(jq -c '[.limit, .injected, .holder_count]' <<<"$output")" '[null,null,1]'
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[0].limit, .locks[0].injected]' <<<"$output")" '[null,null]'
	run -75 --separate-stderr rlock --status -k sem
	[[ $output != *$'\e'* ]] || fail "a raw escape reached the terminal: $(cat -v <<<"$output")"
	# (cut where rlock's copy of the field ends, and said so: '...')
	assert_line --index 0 --partial 'is held by 1 of 3\x1b[2J,"injec... permits'
	rcli SET 'rlock:{sem}:limit' 3 KEEPTTL >/dev/null
	touch sem.release
	rlock_wait "$pid"
}

@test "a command line longer than the owner record keeps (511 bytes) is shown cut with '...', never as if whole" {
	local long
	long=$(printf 'y%.0s' {1..600})
	rlock_bg -t 20s -k cut -- "$HOLD" cut 0 "$long"
	local pid=$RLOCK_PID
	wait_until 30 test -e "$BATS_TEST_TMPDIR/cut.started"
	track_pidfile "$BATS_TEST_TMPDIR/cut.pid"
	run -75 --separate-stderr rlock --status -k cut --json
	local cmd
	cmd=$(jq -r .command <<<"$output")
	[[ $cmd == "$HOLD cut 0 yyy"*'...' ]] || fail "not marked as cut: $cmd"
	((${#cmd} <= 511)) || fail "longer than the record: ${#cmd}"
	touch cut.release
	rlock_wait "$pid"
}

@test "a holder's start in the future (a record by hand, a clock ahead): held_ms is null, never negative, in --status and --list" {
	# The owner record's start is the holder host's clock, read on this one: a record
	# ahead of this clock (another host's skew, a hand-written one) told "held for
	# -98204159439733 ms" in JSON while the text said "-".
	local future=$(($(now_ms) + 3600000))
	rcli SET 'rlock:{ahead}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	rcli HSET 'rlock:{ahead}:owner' host elsewhere pid 4242 user u cmd job \
		start "$future" ttl 30000 fence 1 >/dev/null
	rcli PEXPIRE 'rlock:{ahead}:owner' 30000 >/dev/null
	run -75 --separate-stderr rlock --status -k ahead --json
	assert_equal "$(jq -c '[.start_ms, .held_ms]' <<<"$output")" "[$future,null]"
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '.locks[] | select(.name == "ahead") | .held_ms' <<<"$output")" null
	run -75 --separate-stderr rlock --status -k ahead
	assert_line --regexp '^  since    .* \(-\)$'
	# a shared holder's record (its meta JSON) the same
	rlock_bg -t 20s -s -k sh -- "$HOLD" sh 0
	local pid=$RLOCK_PID tok
	wait_until 30 test -e "$BATS_TEST_TMPDIR/sh.started"
	track_pidfile "$BATS_TEST_TMPDIR/sh.pid"
	tok=$(env_of sh RLOCK_TOKEN)
	rcli HSET 'rlock:{sh}:meta' "$tok" \
		"$(rcli HGET 'rlock:{sh}:meta' "$tok" | jq -c --arg s "$future" '.start = $s')" >/dev/null
	run -75 --separate-stderr rlock --status -k sh --json
	assert_equal "$(jq -c '[.held_ms, .holders[0].held_ms]' <<<"$output")" '[null,null]'
	touch sh.release
	rlock_wait "$pid"
	rcli DEL 'rlock:{ahead}' 'rlock:{ahead}:owner' >/dev/null
}

@test "a holder that waited for the lock is shown held since it got it, not since it asked" {
	# The owner record's start was taken once, before the wait: a waiter that waited an
	# hour showed "held 1h" (since, held_ms, --list's HELD) the moment it got the lock.
	start_holder first -t 20s
	rlock_bg -v -t 20s -w 30s -k first -- "$HOLD" second 0
	local waiter=$RLOCK_PID
	wait_until 30 grep -q "lock 'first' is busy .*; waiting" "$RLOCK_ERR"
	sleep 0.3 # the waiter's request is at least this much older than the release
	local released
	released=$(now_ms)
	touch first.release
	rlock_wait "$HOLDER_PID"
	wait_until 30 test -e "$BATS_TEST_TMPDIR/second.started"
	track_pidfile "$BATS_TEST_TMPDIR/second.pid"
	run -75 --separate-stderr rlock --status -k first --json
	local start
	start=$(jq -r .start_ms <<<"$output")
	((start >= released)) || fail "start_ms $start is before the release at $released: $output"
	touch second.release
	rlock_wait "$waiter"
}

@test "--status --json and --list --json carry a schema number, as --held, --history, --check and the events do" {
	# Stable, growing formats (SPEC 11): a consumer must be able to tell which one it
	# reads. --status and --list had none.
	run -0 --separate-stderr rlock --status -k nobody --json
	assert_equal "$(jq -c '[.schema, .name, .held]' <<<"$output")" '[1,"nobody",false]'
	start_holder sc -t 20s
	run -75 --separate-stderr rlock --status -k sc --json
	assert_equal "$(jq -c '[.schema, .held]' <<<"$output")" '[1,true]'
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.schema, .prefix, (.locks[] | select(.name == "sc") | .held)]' <<<"$output")" '[1,"rlock:",true]'
	touch sc.release
	rlock_wait "$HOLDER_PID"
}

@test "a NUL byte in a holder's field hides nothing after it: escaped in the text, U+FFFD in JSON, --history too" {
	# Anyone who can write the keys can HSET a NUL; the field was cut there, so
	# "db1\0 (not really)" read as host db1.
	rcli SET 'rlock:{nul}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	printf 'db1\0-evil' | rcli -x HSET 'rlock:{nul}:owner' host >/dev/null
	printf 'why\0 not' | rcli -x HSET 'rlock:{nul}:owner' label >/dev/null
	rcli PEXPIRE 'rlock:{nul}:owner' 30000 >/dev/null
	run -75 --separate-stderr rlock --status -k nul
	assert_line '  host     db1\xc0\x80-evil'
	assert_line '  label    why\xc0\x80 not'
	run -75 --separate-stderr rlock --status -k nul --json
	assert_equal "$(jq -ac '[.host, .label]' <<<"$output")" '["db1\ufffd\ufffd-evil","why\ufffd\ufffd not"]'
	run -0 --separate-stderr rlock --list
	assert_line --regexp '^nul +db1\\xc0\\x80-evil '
	rcli DEL 'rlock:{nul}' 'rlock:{nul}:owner' >/dev/null
	printf 'h\0x' | rcli -x XADD 'rlock:{nul}:history' '*' event acquired fence 1 host >/dev/null
	run -0 --separate-stderr rlock --history -k nul --json
	assert_equal "$(jq -ac '.entries[0].host' <<<"$output")" '"h\ufffd\ufffdx"'
	rcli DEL 'rlock:{nul}:history' >/dev/null
}

@test "a fair queue's place read back odd (a lease or pid by hand): null in JSON and ? in the text, never -1" {
	rcli SET 'rlock:{fq}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	rcli ZADD 'rlock:{fq}:queue' "$(($(now_ms) * 1000))" tokA >/dev/null
	rcli ZADD 'rlock:{fq}:qlease' 1e300 tokA >/dev/null
	rcli HSET 'rlock:{fq}:qmeta' tokA '{"host":"h","pid":1e20}' >/dev/null
	run -75 --separate-stderr rlock --status -k fq --json
	assert_equal "$(jq -c '.queue[0] | [.lease_left_ms, .pid]' <<<"$output")" '[null,null]'
	run -75 --separate-stderr rlock --status -k fq
	assert_line --regexp '^  #1 +h pid \?, waiting [0-9.]+s \(token tokA\.\.\., place lease left -\)$'
	rcli DEL 'rlock:{fq}' 'rlock:{fq}:queue' 'rlock:{fq}:qlease' 'rlock:{fq}:qmeta' >/dev/null
	# the last --break's record, and a --preempt hand-over's, the same
	rcli HSET 'rlock:{fq}:broken' host ops pid x1 user u at "$(now_ms)" tokens tokB fence 7 >/dev/null
	rcli PEXPIRE 'rlock:{fq}:broken' 30000 >/dev/null
	rcli HSET 'rlock:{fq}:preempt' handover 1 token tokC host req pid x2 >/dev/null
	rcli PEXPIRE 'rlock:{fq}:preempt' 30000 >/dev/null
	run -75 --separate-stderr rlock --status -k fq
	assert_line --index 0 --regexp '^rlock:\{fq\} is reserved for the --preempt request of req pid \? until '
	assert_line --regexp '^broken   .* by ops pid \? \(user u\): token tokB, fence 7$'
	run -75 --separate-stderr rlock --status -k fq --json
	assert_equal "$(jq -c '[.broken.pid, .reserved.pid]' <<<"$output")" '[null,null]'
	rcli DEL 'rlock:{fq}:broken' 'rlock:{fq}:preempt' >/dev/null
}
