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
