#!/usr/bin/env bats
# rlock itself stopped (SIGSTOP, a debugger, a starved VM) while its command runs: the
# renewal thread and the supervisor stand still, so the watchdog, a separate process,
# kills the command's group by the lease's SIGKILL deadline (SPEC §5: the command never
# runs unprotected); after SIGCONT, rlock reports the loss (79).

# shellcheck disable=SC2016  # quoted $: for the command rlock runs
load helpers

@test "rlock stopped past the lease: the watchdog kills the group before the lease can end; 79 after SIGCONT" {
	death_watch # first: else the command makes dw a plain file
	rlock_bg -t 3s -k st -- sh -c 'exec 9>dw; echo $$ > cmd.pid; sleep 60 & touch started; wait'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	local end
	end=$(lease_end 'rlock:{st}') || fail "no lease left to measure against"
	dead_before "$end" "rlock stopped, ttl 3s"
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost' "$RLOCK_ERR"
}

@test "rlock stopped past the lease: the watchdog kills the command's orphan in a group of its own too (timeout ... & from a subshell that exited); 79" {
	death_watch # first: else the step makes dw a plain file
	cat >step <<'SH'
#!/bin/sh
exec 9>dw
echo $$ >step.pid
touch started
exec sleep 60
SH
	chmod +x step
	rlock_bg -v -v -t 3s -k so -c '(timeout 120 ./step &); exec sleep 120'
	wait_until 10 test -e started
	track_pidfile step.pid
	# the subshell is gone: timeout is rlock's child now, out of a walk from the command
	wait_until 10 grep -q "orphan pid .* is in the watchdog's care" "$RLOCK_ERR"
	kill -STOP "$RLOCK_PID"
	local end
	end=$(lease_end 'rlock:{so}') || fail "no lease left to measure against"
	dead_before "$end" "rlock stopped, ttl 3s, the orphaned step"
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
}

@test "rlock stopped after a renewal, continued once the watchdog killed the group and before the lease ends: 79, the watchdog named, the run recorded lost" {
	# The renewal that follows SIGCONT succeeds (the lease still runs on the server) and
	# moves the watchdog's deadline on before rlock reaps the command: rlock must know
	# from the watchdog itself that it killed the group, not guess from its clock.
	rlock_bg -t 3s -k sc -- sh -c 'echo $$ > cmd.pid; touch started; exec sleep 60'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	renewed_reset
	wait_until 10 renewed 1 'rlock:{sc}' rcli # the renewal thread runs
	kill -STOP "$RLOCK_PID"
	wait_until 15 pidfile_gone cmd.pid || fail "the watchdog did not kill the command"
	key_exists 'rlock:{sc}' || skip "the lease ran out before SIGCONT (a very slow machine)"
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost: .*the watchdog killed the command' "$RLOCK_ERR"
	run -0 rlock -k sc --history
	assert_line --index 0 --regexp '^[-0-9]+ [0-9:]+  lost  .* status 137$'
	refute_output --partial released
}

@test "rlock stopped until the lease ended, then continued: 79, the watchdog named (not a signal sent now)" {
	# What the test above skips on a slow machine: the renewal that follows SIGCONT
	# is refused (the lease is gone), and rlock learns of the loss before it reaps the
	# group the watchdog killed; it must still say the watchdog stopped the command.
	rlock_bg -t 1s -k se -- sh -c 'echo $$ > cmd.pid; touch started; exec sleep 60'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	wait_until 15 pidfile_gone cmd.pid || fail "the watchdog did not kill the command"
	wait_until 15 key_absent 'rlock:{se}'
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost: .*the watchdog killed the command' "$RLOCK_ERR" ||
		fail "the watchdog not named: $(cat "$RLOCK_ERR")"
	[[ $(grep -c 'lock lost' "$RLOCK_ERR") == 1 ]] || fail "said twice: $(cat "$RLOCK_ERR")"
	run -0 rlock -k se --history
	assert_line --index 0 --regexp '^[-0-9]+ [0-9:]+  lost  .* status 137$'
}

@test "--on-lost ignore: a stopped rlock's command goes on (the user chose to run unprotected)" {
	rlock_bg -t 1s --on-lost ignore -k ig -- sh -c 'echo $$ > cmd.pid; touch started; exec sleep 60'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	wait_until 15 key_absent 'rlock:{ig}'
	pidfile_alive cmd.pid || fail "the command was killed despite --on-lost ignore"
	kill -CONT "$RLOCK_PID"
	kill -TERM "$(cat cmd.pid)"
	rlock_wait "$RLOCK_PID" 15
}

# watchdog_of PID: the pid of rlock PID's watchdog process (comm rlock-watchdog).
watchdog_of() {
	local p
	for p in $(children_of "$1"); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == rlock-watchdog ]] && echo "$p" && return 0
	done
	return 1
}

@test "rlock does not wait for its watchdog at exit: a stopped one still ends on its own" {
	rlock_bg -k wd -- sh -c 'echo $$ > cmd.pid; touch started; i=0
		while [ ! -e go ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	wait_until 10 watchdog_of "$RLOCK_PID"
	local wd
	wd=$(watchdog_of "$RLOCK_PID")
	track_pid "$wd"
	kill -STOP "$wd"
	touch go
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{wd}'
	wait_until 10 proc_gone "$wd" || fail "the stopped watchdog $wd outlived rlock"
}

@test "the command starts only once its watchdog exists (a rlock stopped or killed at the fork leaves no command unwatched)" {
	# the command's first act: list rlock's children other than itself
	rlock -k born -- sh -c 'ps -o pid= --ppid "$PPID" | tr -d " " | grep -vx "$$" >kids; touch ran'
	[[ -e ran ]]
	[[ -s kids ]] || fail "rlock had no other child when the command started: no watchdog yet"
}

# suspend_shim: suspend.so, an LD_PRELOAD shim that adds the seconds in the file
# "suspended" to CLOCK_BOOTTIME (re-read every 20 ms), and only to it: what a suspend of
# the machine does (CLOCK_MONOTONIC stops while the machine sleeps; the server's clock,
# and so the lease, runs on).
suspend_shim() {
	cat >suspend.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef int (*gettime_fn)(clockid_t, struct timespec *);
int clock_gettime(clockid_t id, struct timespec *ts)
{
	static gettime_fn real;
	static long long shift, next;
	if (!real)
		real = (gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	int rc = real(id, ts);
	if (rc == 0 && id == CLOCK_BOOTTIME) {
		struct timespec m;
		real(CLOCK_MONOTONIC, &m);
		long long now = (long long)m.tv_sec * 1000000000LL + m.tv_nsec;
		if (now >= next) {
			FILE *f = fopen(getenv("SUSPEND_FILE"), "re");
			if (f) {
				if (fscanf(f, "%lld", &shift) != 1)
					shift = 0;
				fclose(f);
			}
			next = now + 20000000LL;
		}
		ts->tv_sec += shift;
	}
	return rc;
}
C
	"${CC:-cc}" -shared -fPIC -o suspend.so suspend.c -ldl
	echo 0 >suspended
}

@test "the machine suspended past the lease (the monotonic clock stood still, the lease ran out): the loss is seen at resume, not at the next renewal; 79" {
	suspend_shim
	local asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	LD_PRELOAD=$PWD/suspend.so SUSPEND_FILE=$PWD/suspended ASAN_OPTIONS=$asan \
		rlock_bg -t 60s -k sus -- sh -c 'echo $$ > cmd.pid; touch started; exec sleep 120'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	# While the machine slept for 90 s, the 60 s lease ended on the server and another
	# holder took the lock; then the machine resumes. The next renewal is 20 s away.
	rcli SET 'rlock:{sus}' thief PX 600000 >/dev/null
	echo 90 >suspended
	rlock_wait "$RLOCK_PID" 8 || fail "rlock ran the command on after the resume, as if its lease held"
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost' "$RLOCK_ERR"
	[[ $(rcli GET 'rlock:{sus}') == thief ]]
}

@test "rlock stopped or stalled between the acquire and the command's start past the lease: the command never starts; 79" {
	require_tool strace
	# the start (vfork) held up 2.5 s, as by a Ctrl-Z, a SIGSTOP or a blocked write
	# just after the lock was granted: a 1 s lease has ended on the server by then,
	# another may hold the lock; the command ran (the watchdog killed it at once)
	run timeout 60 strace -o trace.log -qq -e trace=vfork -e inject=vfork:delay_enter=2500000 \
		"$RLOCK" -t 1s -k late -- sh -c 'touch ran'
	# (ThreadSanitizer's build starts the command by fork, not vfork: nothing to delay)
	grep -q vfork trace.log || skip "this build of rlock does not start its command by vfork"
	[[ $status == 79 ]] || fail "exit $status: $output"
	[[ ! -e ran ]] || fail "the command ran after the lease had ended"
	[[ $output == *'lock lost'*'the command does not run'* ]] || fail "$output"
	key_absent 'rlock:{late}'
	run -0 rlock --history -k late
	[[ $output == *lost* ]] || fail "the run is not recorded lost: $output"
}
