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
	assert_line --index 0 --partial 'is held by 1 of 3\x1b[2J,"injected permits'
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
