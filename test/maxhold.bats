#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# --max-hold DUR (SPEC §3: 124): the command is stopped as timeout(1) stops it
# (SIGTERM to its process group, SIGKILL after --kill-after), the lock is released and
# rlock exits 124 (137 when it took SIGKILL, as timeout(1)); also settable in the config
# file.

load helpers

setup_file() { common_setup_file --unix; }

teardown() {
	track_pidfile c.pid
	common_teardown
}

@test "a hung command is stopped at --max-hold (from the config file), the lock released: 124" {
	printf 'max-hold = 1s\n' >cfg
	local t0 t1
	t0=$(now_ms)
	run -124 --separate-stderr rlock --config cfg -k mh -c 'echo $$ >c.pid; exec sleep 60'
	t1=$(now_ms)
	echo "# stopped after $((t1 - t0)) ms (max-hold 1000 ms)" >&3
	assert_regex "$stderr" 'max-hold is over: sending SIGTERM'
	key_absent 'rlock:{mh}' || fail "the lock was not released"
	[[ $(rcli GET 'rlock:{mh}:fence') == 1 ]]
	run -0 pidfile_gone c.pid
	# --max-hold 0 on the command line lifts the config file's limit; a command that
	# ends in time keeps its own status.
	run -3 rlock --config cfg --max-hold 0 -k mh -c 'sleep 1.2; exit 3'
	run -0 rlock --max-hold 60s -k mh -- true
}

@test "a command that ignores SIGTERM gets SIGKILL after --kill-after; its whole group is stopped: 137" {
	# The shell ignores TERM; its background child (same group) does not. --max-hold
	# runs from the fork: 1 s lets a slow pass start the shell and set its trap first
	# (a TERM before it ends the shell, and nothing is left to SIGKILL).
	# 137 (128+9), as timeout(1): it took SIGKILL to stop the command.
	run -137 --separate-stderr rlock -k mh --max-hold 1s --kill-after 500ms \
		-c 'trap "" TERM; echo $$ >c.pid; sleep 60 & echo $! >g.pid; while :; do sleep 0.05; done'
	assert_regex "$stderr" 'SIGKILL in 500 ms'
	assert_regex "$stderr" 'still runs [0-9]+ ms after SIGTERM: sending SIGKILL'
	key_absent 'rlock:{mh}' || fail "the lock was not released"
	run -0 pidfile_gone c.pid
	run -0 pidfile_gone g.pid
}

@test "--max-hold: a bad duration is a usage error (64)" {
	run -64 --separate-stderr rlock -k mh --max-hold soon -- true
	assert_one_line_error
}

@test "a stderr nobody reads (a full pipe) cannot delay --max-hold's SIGKILL: the watchdog holds the escalation too; 137" {
	# rlock's stderr: a FIFO whose pipe is full (held open here, read only at the end):
	# rlock's "--max-hold is over" line blocks its supervisor; the SIGKILL after
	# --kill-after must land even so, not at the lease's end (-t 60s: 54 s).
	mkfifo errpipe
	exec 8<>errpipe
	head -c 65536 /dev/zero >&8
	local t0 t1
	t0=$(now_ms)
	(clean_exec "$RLOCK" -t 60s -k mh --max-hold 1s --kill-after 500ms \
		-c 'trap "" TERM; echo $$ >c.pid; while :; do sleep 0.05; done') </dev/null >/dev/null 2>errpipe &
	local rpid=$!
	track_pid "$rpid"
	wait_until 30 test -s c.pid
	wait_until 40 pidfile_gone c.pid || fail "the command outlived --max-hold + --kill-after by far"
	t1=$(now_ms)
	echo "# the command was killed $((t1 - t0)) ms after the start (max-hold 1000 ms + kill-after 500 ms)" >&3
	((t1 - t0 < 20000)) || fail "SIGKILL came $((t1 - t0)) ms after the start: at the lease's end, not after --kill-after"
	cat <&8 >/dev/null &
	local drain=$!
	rlock_wait "$rpid" 30
	kill "$drain" 2>/dev/null || true
	exec 8>&-
	assert_equal "$RLOCK_STATUS" 137
	key_absent 'rlock:{mh}' || fail "the lock was not released"
}

# term_once FIRST: a command that traps SIGTERM (counting each in terms) is stopped by
# --max-hold and by a loss (its key deleted: the next renewal finds it gone), FIRST the
# one that comes first. The stop already under way sent SIGTERM: the second sends none
# (timeout(1) sends one; a second cuts a cleanup short), it only brings SIGKILL on; 79.
term_once() {
	local mh=1s
	[[ $1 == loss ]] && mh=1200ms # after the loss at the first renewal (-t 2s: ~670 ms)
	rlock_bg -t 2s -k mh --max-hold "$mh" --kill-after 5s \
		-c 'trap "echo TERM >>terms" TERM; echo $$ >c.pid; while :; do sleep 0.05 || :; done'
	wait_until 30 test -s c.pid
	if [[ $1 == max-hold ]]; then
		wait_until 30 grep -q 'max-hold is over' "$RLOCK_ERR"
	fi
	rcli DEL 'rlock:{mh}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'max-hold is over' "$RLOCK_ERR" || fail "no --max-hold: $(cat "$RLOCK_ERR")"
	grep -q 'lock lost' "$RLOCK_ERR" || fail "no loss: $(cat "$RLOCK_ERR")"
	assert_equal "$(cat terms)" TERM
	grep -q 'not sent again' "$RLOCK_ERR" || fail "$(cat "$RLOCK_ERR")"
	run -0 pidfile_gone c.pid
}

@test "--max-hold's SIGTERM, then the lock lost: the command hears SIGTERM once, then SIGKILL before the lease ends; 79" {
	term_once max-hold
}

@test "the lock lost (SIGTERM), then --max-hold over: the command hears SIGTERM once, then SIGKILL before the lease ends; 79" {
	term_once loss
}
