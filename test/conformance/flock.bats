#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Conformance with flock(1): every case of util-linux's own flock tests
# (tests/ts/flock/{flock,close,unlock,range-lock} and their expected outputs in
# tests/expected/flock/, util-linux commit 39465c78) that can apply to rlock, as a test of
# rlock against a real redis-server: the same scenario, the same expected outcome, in
# rlock's terms (a lock NAME instead of a file; the conflict status as -E sets it).
# The scenarios and outcomes are carried over; the tests are this project's own.
# Where rlock deliberately differs, docs/compatibility.md ("Differences from flock(1) and
# timeout(1)") says so and why.
#
# Upstream cases that cannot apply (each listed once, with the reason):
# - flock/fd, flock/fcntl-fd, unlock (its first two steps): a lock on an open file
#   descriptor (`flock -n 4`, `flock --fd N`, `flock --unlock N`): rlock's lock lives in
#   Redis, not on a file; no descriptor holds it, so there is none to name or unlock.
# - flock/fcntl-* (non-block, no-fork, shared, exclusive, timeout, time-check): the
#   same scenarios through fcntl(2) OFD locks (--fcntl); rlock has one kind of lock,
#   and the flock/* tests below cover each scenario once.
# - flock/fcntl-vs-flock: flock(2) and fcntl(2) locks on one file are independent;
#   rlock has no second lock API to be independent of.
# - flock/no-fork (--no-fork): rlock must stay beside the command to renew its lease and
#   release it, so it always forks; --no-fork is not accepted (64, tested below).
# - close (--close): flock closes the lock's descriptor in the command so that the
#   command's children do not hold the lock; the command never gets a descriptor of
#   rlock's (fds.bats), and the lock covers the command's process group; --close is not
#   accepted (64, tested below). Its other half (the command, without --close, can lock
#   what its parent holds) is the re-entrance test below.
# - range-lock (--fcntl --start --length): byte ranges of a file; a Redis lock has none.

load ../helpers

setup_file() { common_setup_file --unix; }

# flock_holder: flock/flock's "general lock": a shared holder that prints while it
# holds (Locking ... Unlocking) and lets go when gen.release exists.
flock_holder() {
	rlock_bg --shared -k lockfile -- sh -c \
		'echo Locking; echo $$ >gen.pid; touch gen.started
		 i=0; while [ ! -e gen.release ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
		 date +%s%3N >gen.end; echo Unlocking'
	GEN_PID=$RLOCK_PID GEN_OUT=$RLOCK_OUT
	wait_until 30 test -e gen.started
	track_pidfile gen.pid
}

# waiting NAME: an rlock waits for NAME's release.
waiting() { (($(waiters "$1") >= 1)); }

release_holder() {
	touch gen.release
	rlock_wait "$GEN_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat "$GEN_OUT")" $'Locking\nUnlocking'
}

@test "flock/non-block: --nonblocking --conflict-exit-code 123 on a held lock: 123, the command never runs" {
	flock_holder
	run -123 --separate-stderr rlock --nonblocking --conflict-exit-code 123 -k lockfile -- \
		echo "You will never see this!"
	assert_output ''
	release_holder
}

@test "flock/non-block: flock's other spellings --nb and --nonblock, and -n, mean the same" {
	flock_holder
	local opt
	for opt in --nb --nonblock -n; do
		run -123 --separate-stderr rlock "$opt" -E 123 -k lockfile -- echo "You will never see this!"
		assert_output ''
	done
	release_holder
}

@test "flock/shared: --shared while another shared holder runs: 0, the command runs" {
	flock_holder
	run -0 --separate-stderr rlock --shared -k lockfile -- echo "Have shared lock"
	assert_output "Have shared lock"
	release_holder
}

@test "flock/exclusive: --nb --exclusive --conflict-exit-code 123 against a shared holder: 123" {
	flock_holder
	run -123 --separate-stderr rlock --nb --exclusive --conflict-exit-code 123 -k lockfile -- \
		echo "You will never see this!"
	assert_output ''
	# -x, flock's short form, the same
	run -123 --separate-stderr rlock -n -x -E 123 -k lockfile -- echo "You will never see this!"
	assert_output ''
	release_holder
}

@test "flock/timeout and time-check: --timeout 5 -E 5 waits for the holder, then runs: 0" {
	flock_holder
	rlock_bg --timeout 30 --conflict-exit-code 5 -k lockfile -- \
		sh -c 'date +%s%3N >w.start; echo "After timeout."'
	local waiter=$RLOCK_PID wout=$RLOCK_OUT
	wait_until 30 waiting lockfile
	[[ ! -e w.start ]] || fail "the waiter ran while the shared holder held the lock"
	release_holder
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat "$wout")" "After timeout."
	# time-check, as an order rather than a window of seconds: the waiter's command
	# started only after the holder's ended.
	(($(cat w.start) >= $(cat gen.end))) ||
		fail "the waiter started at $(cat w.start), before the holder ended at $(cat gen.end)"
}

@test "difference: a busy lock exits 75 by default (flock: 1); -E 1 gives flock's status" {
	flock_holder
	run -75 --separate-stderr rlock -n -k lockfile -- echo "You will never see this!"
	assert_output ''
	run -1 --separate-stderr rlock -n -E 1 -k lockfile -- echo "You will never see this!"
	assert_output ''
	release_holder
}

@test "flock/timeout: -w that runs out on a held lock: the -E status, the command never runs" {
	flock_holder
	run -5 --separate-stderr rlock -w 0.3 -E 5 -k lockfile -- echo "You will never see this!"
	assert_output ''
	run -5 --separate-stderr rlock --wait 0.3 -E 5 -k lockfile -- echo "You will never see this!"
	assert_output ''
	release_holder
}

@test "unlock: --exclusive --wait 0 --verbose on a free lock: 0; verbose says how long the lock took" {
	run -0 --separate-stderr rlock --exclusive --wait 0 --verbose -k lock -- true
	assert_output ''
	assert_regex "$stderr" 'got the lock rlock:\{lock\} after [0-9]+\.[0-9] s'
}

@test "unlock: --wait 0 means --nonblock: on a held lock it fails at once with the conflict status" {
	flock_holder
	local t0 t1
	t0=$(now_ms)
	run -123 --separate-stderr rlock -x --wait 0 -E 123 -k lockfile -- echo "You will never see this!"
	t1=$(now_ms)
	assert_output ''
	echo "# -w 0 on a held lock gave up after $((t1 - t0)) ms" >&3
	release_holder
}

@test "close (its second half): the command can take, non-blocking, the lock its rlock holds" {
	# flock: without --close the command inherits the locked descriptor, and its own
	# `flock --nonblock` on it succeeds. rlock: a nested rlock of the same name in the
	# command is granted by re-entrance.
	run -0 --separate-stderr rlock --exclusive -k lock -c \
		'"$RLOCK" --exclusive --nonblock -k lock -- true; echo "exit code: $?"'
	assert_output "exit code: 0"
}

@test "flock's options with no meaning for a lock in Redis are refused with one line: 64" {
	local opt
	for opt in --close -o --no-fork -F --fcntl --unlock; do
		run -64 --separate-stderr rlock "$opt" -k lock -- true
		assert_one_line_error
	done
	for opt in --fd --start --length; do
		run -64 --separate-stderr rlock "$opt" 1 -k lock -- true
		assert_one_line_error
	done
}

@test "flock's bad -E (over 255) and bad -w are usage errors: 64 (flock: EX_USAGE, 64)" {
	run -64 --separate-stderr rlock -n -E 256 -k lock -- true
	assert_one_line_error
	run -64 --separate-stderr rlock -w invalid -k lock -- true
	assert_one_line_error
	run -64 --separate-stderr rlock -w -1 -k lock -- true
	assert_one_line_error
}

@test "flock: the command's status is rlock's; a command that cannot run: 126/127" {
	run -3 rlock -k lock -c 'exit 3'
	run -126 --separate-stderr rlock -k lock -- .
	run -127 --separate-stderr rlock -k lock -- no_such_command_here
}
