#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# File descriptors (SPEC §5): none of rlock's (Redis sockets, config files) leaks into
# the command; the user's own descriptors pass through untouched.
# rlock is started through a launcher that closes every fd ≥ 3 first (bats keeps 3 and
# 4 open), so anything beyond 0,1,2 (and deliberately passed fds) came from rlock.

load helpers

teardown() {
	track_pidfile c.pid
	common_teardown
}

# child_fds: the fd numbers of the command (pid in c.pid), space-separated, sorted.
child_fds() {
	local pid
	pid=$(cat c.pid)
	# shellcheck disable=SC2012
	ls "/proc/$pid/fd" | sort -n | tr '\n' ' ' | sed 's/ $//'
}

wait_for_sleep() {
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]'
}

finish() {
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
}

@test "the command sees only fds 0, 1, 2" {
	rlock_bg -k f -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_for_sleep
	local fds
	fds=$(child_fds)
	if [[ $fds != '0 1 2' ]]; then
		ls -l "/proc/$(cat c.pid)/fd" >&2
		fail "command has fds '$fds', expected '0 1 2'"
	fi
	finish
}

@test "the command sees only fds 0, 1, 2 with -c" {
	rlock_bg -k f -c 'echo $$ >c.pid; exec sleep 30'
	wait_for_sleep
	assert_equal "$(child_fds)" '0 1 2'
	finish
}

@test "the command sees only fds 0, 1, 2 (unix-socket server)" {
	# a private server for this test only; the per-file variables are not needed after
	redis_start --unix
	rlock_bg -u "$REDIS_URL" -k f -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_for_sleep
	assert_equal "$(child_fds)" '0 1 2'
	finish
	assert_equal "$RLOCK_STATUS" 143
	redis_stop "$REDIS_PID"
}

@test "a passed fd (5<file) reaches the command untouched" {
	echo 'hello from fd 5' >in5
	rlock_bg --keep-fds 5 -k f -- sh -c 'echo $$ >c.pid; exec sleep 30' 5<in5
	wait_for_sleep
	assert_equal "$(child_fds)" '0 1 2 5'
	assert_equal "$(readlink "/proc/$(cat c.pid)/fd/5")" "$BATS_TEST_TMPDIR/in5"
	finish
}

@test "passed fds are usable: read from 5, write to 7" {
	echo 'hello from fd 5' >in5
	run -0 rlock -k f -- sh -c 'cat <&5; echo "to fd 7" >&7' 5<in5 7>out7
	assert_output 'hello from fd 5'
	assert_equal "$(cat out7)" 'to fd 7'
}

@test "stdin passes through to the command" {
	run -0 sh -c 'printf "line1\nline2\n" | "$RLOCK" -k f -- cat'
	assert_output $'line1\nline2'
}

@test "the stdout of rlock is the command's (no buffering, no extra output)" {
	run -0 --separate-stderr rlock -k f -- sh -c 'echo one; echo two'
	assert_output $'one\ntwo'
	assert_equal "$stderr" ""
}

@test "a nested run under an inherited lock (re-entered whole, or taking another name too) keeps its watch's socket and pipes from its command: fds 0, 1, 2" {
	local names
	for names in '-k f' '-k f -k g'; do
		rm -f c.pid
		# shellcheck disable=SC2086 # two words: the names
		rlock_bg -k f -- sh -c 'exec "$RLOCK" '"$names"' -- sh -c "echo \$\$ >c.pid; exec sleep 30"'
		wait_for_sleep
		assert_equal "$(child_fds)" '0 1 2'
		finish
	done
}
