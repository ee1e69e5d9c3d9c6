#!/usr/bin/env bats
# The command's process group (SPEC §5): the lock is kept until the group is empty, a
# process that starts its own session leaves it; signals reach a stopped group; rlock
# dies of the command's signal; a nested (re-entered) rlock gives the command the
# caller's signal mask.

# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
load helpers

@test "a background job of the command keeps the lock until it ends (rlock -c 'job &')" {
	rlock_bg -k bg -c "$HOLD job & echo \$\$ > sh.pid; exit 0"
	wait_until 30 test -e job.started
	track_pidfile job.pid
	wait_until 30 pidfile_gone sh.pid # the command itself has exited
	proc_alive "$RLOCK_PID" || fail "rlock exited while the job it started still runs"
	key_exists 'rlock:{bg}' || fail "lock released while the job still runs"
	touch job.release
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{bg}'
}

@test "a daemon that starts its own session leaves the group: rlock does not wait for it, and says so with -v" {
	rlock_bg -k daemon -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > d.pid; exit 0'
	rlock_wait "$RLOCK_PID" 30
	track_pidfile d.pid
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{daemon}'
	pidfile_alive d.pid || fail "the daemon was killed"
	[[ ! -s $RLOCK_ERR ]] || fail "not quiet on success: $(cat "$RLOCK_ERR")"
	kill "$(cat d.pid)"
	# a double fork (the classic daemon): the grandchild, in a session of its own, is
	# reparented to rlock when its parent exits; -v names it before the release
	rlock_bg -v -k daemon -c '(setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > d2.pid) ; exit 0'
	rlock_wait "$RLOCK_PID" 30
	track_pidfile d2.pid
	assert_equal "$RLOCK_STATUS" 0
	pidfile_alive d2.pid || fail "the daemon was killed"
	grep -q "process $(cat d2.pid) ([a-z]*) left rlock's session" "$RLOCK_ERR" || fail "not said: $(cat "$RLOCK_ERR")"
	kill "$(cat d2.pid)"
}

@test "a zombie left in the group by a parent that left it does not hold the lock" {
	# B (in the group) exits at once; its parent A starts its own session and never
	# reaps it: B stays a zombie in the group, running nothing.
	rlock_bg -k zombie -c 'perl -MPOSIX -e '\''my $p = fork; exit 0 unless $p; POSIX::setsid();
		open my $f, ">", "a.pid"; print $f "$$\n"; close $f; sleep 300'\'' & exit 0'
	rlock_wait "$RLOCK_PID" 30
	track_pidfile a.pid
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{zombie}'
}

@test "rlock SIGKILLed while a background job of the command runs: the watchdog kills the group" {
	rlock_bg -k wd -c 'sleep 300 & echo $! > bg.pid; exit 0'
	wait_until 30 test -s bg.pid
	track_pidfile bg.pid
	wait_until 30 pidfile_alive bg.pid
	proc_alive "$RLOCK_PID" || fail "rlock exited while the job it started still runs"
	kill -KILL "$RLOCK_PID"
	wait_until 30 pidfile_gone bg.pid || fail "the background job survived rlock"
}

@test "a forwarded signal reaches the background job left in the group" {
	rlock_bg -k fwd -c 'echo $$ > sh.pid; sleep 300 & echo $! > bg.pid; exit 0'
	wait_until 30 test -s bg.pid
	track_pidfile bg.pid
	# the command itself has exited (its 0 says nothing of the stop that ended the job)
	wait_until 30 pidfile_gone sh.pid
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	# rlock dies of it, as of a signal during the release: a calling loop sees the
	# interrupt (this said 0, the command's own status, and the loop went on)
	assert_equal "$RLOCK_STATUS" 143
	pidfile_gone bg.pid
	key_absent 'rlock:{fwd}'
}

@test "a signal forwarded to a stopped command arrives (SIGCONT follows): no lock held forever" {
	rlock_bg -k stopped -- sh -c 'echo $$ > cmd.pid; exec sleep 300'
	wait_until 30 test -s cmd.pid
	track_pidfile cmd.pid
	kill -STOP "$(cat cmd.pid)"
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 143
	key_absent 'rlock:{stopped}'
}

# status_of CMD...: how CMD ended, as "exit N" or "signal N" (perl's $?).
status_of() {
	perl -e 'system @ARGV; my $s = $?; print $s & 127 ? "signal " . ($s & 127) : "exit " . ($s >> 8)' "$@"
}

@test "the command dies of a signal: rlock dies of the same signal after releasing (as timeout)" {
	run -0 status_of "$RLOCK" -k sig -- sh -c 'kill -TERM $$'
	assert_output "signal 15"
	key_absent 'rlock:{sig}'
	# no core file, whatever the caller's limit
	run -0 status_of sh -c "ulimit -c unlimited 2>/dev/null; cd '$BATS_TEST_TMPDIR' && exec '$RLOCK' -k sig -- sh -c 'kill -SEGV \$\$'"
	assert_output "signal 11"
	key_absent 'rlock:{sig}'
	# a normal exit status is still just that
	run -0 status_of "$RLOCK" -k sig -- sh -c 'exit 130'
	assert_output "exit 130"
}

@test "nested rlock (re-entered) execs its command with the caller's signal mask" {
	# (no shell in between: dash clears the mask at start and would hide it)
	run -0 --separate-stderr clean_exec "$RLOCK" -k nest -- "$RLOCK" -k nest -- \
		grep SigBlk /proc/self/status
	assert_output "SigBlk:	0000000000000000"
	run -0 --separate-stderr clean_exec "$RLOCK" -k nest -- "$RLOCK" -k nest -- \
		bash -c 'yes | head -1'
	assert_output "y"
	[[ $stderr != *"Broken pipe"* ]] || fail "yes died noisily of a blocked SIGPIPE: $stderr"
}
