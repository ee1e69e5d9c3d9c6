#!/usr/bin/env bats
# rlock itself stopped (SIGSTOP, a debugger, a starved VM) while its command runs: the
# renewal thread and the supervisor stand still, so the watchdog, a separate process,
# kills the command's group by the lease's SIGKILL deadline (SPEC §5: the command never
# runs unprotected); after SIGCONT, rlock reports the loss (79).

# shellcheck disable=SC2016  # quoted $: for the command rlock runs
load helpers

# death_watch: records (wall clock, ms) when the last holder of FIFO `dw`'s write end
# dies: the command opens it (`exec 9>dw`), every process of its group inherits it.
death_watch() {
	mkfifo dw
	perl -MTime::HiRes=time -e 'open my $f, "<", "dw" or die; 1 while sysread $f, my $b, 1;
		printf "%d\n", time * 1000' >dead.ms 2>&1 3>&- 4>&- &
	track_pid $!
}

# lease_end KEY: when (wall clock, ms) KEY expires on the server if nothing renews it.
lease_end() {
	local t
	t=$(rcli PEXPIRETIME "$1")
	((t > 0)) || return 1
	echo "$t"
}

@test "rlock stopped past the lease: the watchdog kills the group before the lease can end; 79 after SIGCONT" {
	rlock_bg -t 3s -k st -- sh -c 'exec 9>dw; echo $$ > cmd.pid; sleep 60 & touch started; wait'
	death_watch
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	local end t_dead
	end=$(lease_end 'rlock:{st}') || fail "no lease left to measure against"
	wait_until 30 test -s dead.ms || fail "the command's group survived a stopped rlock"
	t_dead=$(cat dead.ms)
	echo "# rlock stopped, ttl 3s: command's group dead $((end - t_dead)) ms before the lease could end" >&3
	((t_dead < end)) || fail "group dead $((t_dead - end)) ms AFTER the lease end"
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost' "$RLOCK_ERR"
}

@test "--on-lost ignore: a stopped rlock's command goes on (the user chose to run unprotected)" {
	rlock_bg -t 1s --on-lost ignore -k ig -- sh -c 'echo $$ > cmd.pid; touch started; exec sleep 60'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	kill -STOP "$RLOCK_PID"
	wait_until 15 key_absent 'rlock:{ig}'
	proc_alive "$(cat cmd.pid)" || fail "the command was killed despite --on-lost ignore"
	kill -CONT "$RLOCK_PID"
	kill -TERM "$(cat cmd.pid)"
	rlock_wait "$RLOCK_PID" 15
}
