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
