#!/usr/bin/env bats
# The guard of the command: rlock's watchdog, the process that kills the command's
# whole group when rlock dies (PR_SET_PDEATHSIG reaches only the direct child, not what
# a shell command started). No single kill may reach both rlock and its watchdog: a
# kill of rlock's process group (`timeout -s KILL`, `kill -9 %job`, `kill -KILL --
# -PGID`, supervisors) leaves the watchdog, in a session of its own, to kill the group.
# A guard that cannot be set up means the command does not run (71, the lock given
# back); a watchdog that dies while the command runs is replaced.

# shellcheck disable=SC2016  # quoted $: for the command rlock runs
load helpers

# make_step: ./step, a command's own child (a grandchild of rlock): records its pid
# and waits. PDEATHSIG never reaches it; only the watchdog can.
make_step() {
	cat >step <<'EOF'
#!/bin/sh
echo $$ >step.pid
touch started
exec sleep 60
EOF
	chmod +x step
}

# step_dies WHAT: the step (rlock's grandchild) is dead within 20 s, and the lock
# expires by its TTL, not held by anyone afterwards.
step_dies() {
	track_pidfile step.pid
	wait_until 20 pidfile_gone step.pid ||
		fail "$1: the command's own child (pid $(cat step.pid)) runs on unprotected"
	wait_until 30 key_absent 'rlock:{g}'
	run -0 rlock -n -k g -- true
}

# session_of PID: the session id of PID (field 6 of /proc/PID/stat).
session_of() {
	local s
	s=$(cat "/proc/$1/stat") || return 1
	s=${s##*) }
	read -r _ _ _ s _ <<<"$s"
	echo "$s"
}

# watchdog_of PID: the pid of rlock PID's watchdog process (comm rlock-watchdog).
watchdog_of() {
	local p
	for p in $(children_of "$1"); do
		if [[ $(cat "/proc/$p/comm" 2>/dev/null) == rlock-watchdog ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

@test "the watchdog is in a session (and so a process group) of its own" {
	make_step
	exec 7>high.fd
	rlock_bg --pgrp --keep-fds 7 -k g -c './step; true'
	exec 7>&-
	wait_until 30 test -s step.pid
	track_pidfile step.pid
	local w
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	track_pid "$w"
	assert_equal "$(session_of "$w")" "$w"
	[[ $(session_of "$w") != "$(session_of "$RLOCK_PID")" ]]
	# and it keeps nothing of the caller's, whatever the number: only its pipes, its
	# orders on 0 and its report (the deadline it acted on) on 1
	assert_equal "$(find "/proc/$w/fd" -mindepth 1 -printf '%f\n' | sort -n | xargs)" '0 1'
	[[ $(readlink "/proc/$w/fd/0") == pipe:* && $(readlink "/proc/$w/fd/1") == pipe:* ]]
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
}

@test "timeout -s KILL (it SIGKILLs its whole process group): the command's own children die too" {
	make_step
	# timeout leads a process group of its own and, when its time is up (SIGALRM, sent
	# here at once rather than waited for), SIGKILLs that whole group: rlock and, unless
	# it is elsewhere, its watchdog.
	(clean_exec timeout -s KILL 300 "$RLOCK" -t 3s -k g -c './step; true') \
		</dev/null >out 2>err &
	local t=$!
	track_pid "$t"
	wait_until 30 test -e started
	kill -ALRM "$t"
	wait_until 20 proc_gone "$t"
	step_dies "timeout -s KILL"
}

@test "kill -KILL -- -PGID of rlock's process group: the command's own children die too" {
	make_step
	rlock_bg --pgrp -t 3s -k g -c './step; true'
	wait_until 30 test -e started
	kill -KILL -- "-$RLOCK_PID"
	step_dies "kill -KILL -- -PGID"
}

@test "kill -9 %job in a shell with job control: the command's own children die too" {
	make_step
	# set -m: the job gets a process group of its own, and %1 names that group.
	(clean_exec bash -c 'set -m
		"$1" -t 3s -k g -c "./step; true" &
		i=0
		while [ ! -e started ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
		kill -9 %1
		wait' bash "$RLOCK") </dev/null >out 2>err &
	track_pid $!
	wait_until 40 test -s step.pid
	wait_until 40 proc_gone $!
	step_dies "kill -9 %job"
}

# A command's process that moves to a process group of its own (timeout(1) without
# --foreground does setpgid; so does a job-control shell's job) stays under the lock:
# the cover is every group of rlock's session that the command's processes are in.
@test "rlock SIGKILLed: a step in timeout(1)'s own process group dies too" {
	make_step
	rlock_bg -t 3s -k g -c 'timeout 120 ./step; true'
	wait_until 30 test -e started
	kill -KILL "$RLOCK_PID"
	step_dies "rlock SIGKILLed, the step in timeout's group"
}

# The command's shell stopped (a job's Ctrl-Z, kill -STOP) when rlock dies: its group,
# orphaned with a stopped member, gets the kernel's SIGHUP and SIGCONT, the shell dies
# of it, and timeout's group below it went out of the watchdog's sight, running on
# (3 of 5 runs); rlock tells the watchdog of the stopped command's groups.
@test "rlock SIGKILLed while its command's shell is stopped: a step in timeout(1)'s own process group dies too" {
	make_step
	rlock_bg -v -v -t 3s -k g -c 'echo $$ >sh.pid; timeout 120 ./step; true'
	wait_until 30 test -e started
	track_pidfile sh.pid
	kill -STOP "$(cat sh.pid)"
	wait_until 20 grep -q "command is stopped: its process group .* in the watchdog's care" "$RLOCK_ERR" ||
		fail "the watchdog was not told of timeout's group: $(cat "$RLOCK_ERR")"
	kill -KILL "$RLOCK_PID"
	step_dies "rlock SIGKILLed, its command stopped, the step in timeout's group"
}

# orphan_told: rlock (-v -v) has told its watchdog of the command's orphan.
orphan_told() { grep -q "orphan pid .* is in the watchdog's care" "$RLOCK_ERR"; }

# A step whose parent died is reparented to rlock (its child subreaper): a walk from
# the command no longer finds it, and once rlock is gone it is init's child.
@test "rlock SIGKILLed after the command exited: its job in timeout(1)'s group (rlock's orphan) dies too" {
	make_step
	rlock_bg -v -v -t 3s -k g -c 'timeout 120 ./step & echo $$ >outer.pid'
	wait_until 30 test -e started
	track_pidfile step.pid
	wait_until 30 pidfile_gone outer.pid
	wait_until 30 orphan_told
	kill -KILL "$RLOCK_PID"
	step_dies "rlock SIGKILLed, the orphaned step in timeout's group"
}

@test "rlock SIGKILLed while the command runs: a job in timeout(1)'s group whose subshell exited dies too" {
	make_step
	rlock_bg -v -v -t 3s -k g -c '(timeout 120 ./step &); exec sleep 120'
	wait_until 30 test -e started
	track_pidfile step.pid
	wait_until 30 orphan_told
	kill -KILL "$RLOCK_PID"
	step_dies "rlock SIGKILLed, the orphaned step in timeout's group"
}

@test "the lock lost: a step in timeout(1)'s own process group is stopped too, 79" {
	make_step
	rlock_bg -t 3s -k g -c 'timeout 120 ./step; true'
	wait_until 30 test -e started
	track_pidfile step.pid
	rcli DEL 'rlock:{g}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	wait_until 20 pidfile_gone step.pid || fail "the step runs on after the loss"
}

@test "a background job in another process group (timeout ... &) keeps the lock until it ends" {
	make_step
	rlock_bg -t 3s -k g -c 'timeout 120 ./step & echo $$ >outer.pid'
	wait_until 30 test -e started
	track_pidfile step.pid
	wait_until 30 pidfile_gone outer.pid
	# the command's shell is gone; its job runs on in timeout's group: still held
	run ! wait_until 2 proc_gone "$RLOCK_PID"
	key_exists 'rlock:{g}'
	kill "$(cat step.pid)"
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{g}'
}

@test "a child rlock inherited through exec is not the command's: neither stopped with it nor waited for" {
	cat >bgjob <<'EOF'
#!/bin/sh
echo $$ >"$1.pid"
exec sleep 60
EOF
	chmod +x bgjob
	# --max-hold stops the command's cover; the job the shell started before its exec is
	# in a group of its own (timeout's), and rlock's child only by inheritance
	run -124 bash -c 'timeout 60 ./bgjob one >/dev/null 2>&1 & echo $! >t1.pid; exec "$RLOCK" -k g --max-hold 1s -- sleep 30'
	track_pidfile t1.pid
	wait_until 10 test -s one.pid
	track_pidfile one.pid
	proc_alive "$(cat one.pid)" || fail "the inherited job was stopped with the command"
	# and the end does not wait for it (it would: 60 s, past this timeout)
	run -0 timeout 20 bash -c 'timeout 60 ./bgjob two >/dev/null 2>&1 & echo $! >t2.pid; exec "$RLOCK" -k g -- true'
	track_pidfile t2.pid
	wait_until 10 test -s two.pid
	track_pidfile two.pid
	key_absent 'rlock:{g}'
}

@test "the watchdog killed while the command runs: a new one guards it" {
	make_step
	rlock_bg --pgrp -t 3s -k g -c './step; true'
	wait_until 30 test -e started
	local w
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	kill -KILL "$w"
	wait_until 20 eval '[[ $(watchdog_of "$RLOCK_PID") =~ ^[0-9]+$ && $(watchdog_of "$RLOCK_PID") != "$w" ]]' ||
		fail "no new watchdog after the first was killed"
	grep -q 'a new one guards the command' "$RLOCK_ERR"
	kill -KILL -- "-$RLOCK_PID"
	step_dies "rlock's group killed after its watchdog was replaced"
}

@test "while rlock waits for the lock its watchdog is up already; killed meanwhile, a new one guards the command" {
	make_step
	rlock_bg -k g -- sh -c 'while [ ! -e go ]; do sleep 0.02; done'
	local holder=$RLOCK_PID w='' w2
	wait_until 30 key_exists 'rlock:{g}'
	rlock_bg --pgrp -w 60 -t 3s -k g -c './step; true'
	# forked during a busy attempt's round trip, or as it first goes to sleep
	wait_until 30 eval 'w=$(watchdog_of "$RLOCK_PID")' || fail "no watchdog while waiting"
	track_pid "$w"
	[[ ! -e started ]]
	assert_equal "$(session_of "$w")" "$w"
	kill -KILL "$w"
	touch go
	rlock_wait "$holder" 30
	wait_until 30 test -e started
	w2=$(watchdog_of "$RLOCK_PID") || fail "no watchdog once the command runs"
	track_pid "$w2"
	[[ $w2 != "$w" ]] || fail "the dead watchdog is still counted on"
	assert_equal "$(session_of "$w2")" "$w2"
	kill -KILL -- "-$RLOCK_PID"
	step_dies "rlock's group killed after its first watchdog died while it waited"
}

@test "a waiter's watchdog is up as soon as it sleeps, not forked when the lock comes (a hand-off does not wait for the fork)" {
	rlock_bg -k gw -- sh -c 'while [ ! -e go ]; do sleep 0.02; done'
	local holder=$RLOCK_PID w=''
	wait_until 30 key_exists 'rlock:{gw}'
	# the default ttl (30 s): no attempt after its first ones for 2.5 s at least (the
	# safety net); the replies of those come at once on loopback, with no round trip
	# left to fork in
	rlock_bg -w 60 -k gw -- true
	local waiter=$RLOCK_PID
	wait_until 30 eval '[[ $(rcli ZCARD "rlock:{gw}:waiters") == 1 ]]'
	wait_until 2 eval 'w=$(watchdog_of "$waiter")' || fail "no watchdog 2 s after it took its place"
	track_pid "$w"
	touch go
	rlock_wait "$holder" 30
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
}

# A pids cgroup for one rlock run, made by the test (root): v1's pids hierarchy, or
# v2 where the pids controller is enabled at its root.
pids_cgroup_root() {
	if [[ -w /sys/fs/cgroup/pids/cgroup.procs ]]; then
		echo /sys/fs/cgroup/pids
	elif [[ -f /sys/fs/cgroup/cgroup.subtree_control ]] &&
		grep -qw pids /sys/fs/cgroup/cgroup.subtree_control; then
		echo /sys/fs/cgroup
	else
		return 1
	fi
}

@test "the watchdog cannot be started (a pids cgroup at its max): the command does not run, the lock is given back, 71" {
	((EUID == 0)) || ci_skip "needs root (a pids cgroup)"
	local root cg max st saw=0
	root=$(pids_cgroup_root) || ci_skip "no writable pids cgroup controller"
	# Every limit from 1 task up: rlock's threads and forks each count. Whatever step
	# hits the limit, the command runs only with its watchdog, and a run that stops
	# gives the lock back.
	for max in 1 2 3 4 5 6 7 8; do
		cg=$root/rlock-guard-$$-$max
		mkdir "$cg"
		echo "$cg" >>cgroups
		echo "$max" >"$cg/pids.max"
		st=0
		(echo "$BASHPID" >"$cg/cgroup.procs" && exec "$RLOCK" -k pc -- touch "ran.$max") \
			</dev/null >"out.$max" 2>"err.$max" || st=$?
		echo "# pids.max $max: status $st: $(head -c 200 "err.$max")" >&3
		if grep -q watchdog "err.$max"; then
			saw=1
			assert_equal "$st" 71
			[[ ! -e ran.$max ]] || fail "the command ran without its watchdog (pids.max $max)"
			grep -q 'cannot start the watchdog' "err.$max"
			assert_equal "$(wc -l <"err.$max")" 1
		fi
		if ((st != 0)); then
			assert_equal "$st" 71
			[[ ! -e ran.$max ]] || fail "the command ran, yet rlock exited $st (pids.max $max)"
			key_absent 'rlock:{pc}' || fail "the lock was not given back (pids.max $max)"
		else
			[[ -e ran.$max ]]
		fi
		rcli DEL 'rlock:{pc}' >/dev/null
	done
	((saw)) || fail "no limit made the watchdog's fork fail"
}

teardown() {
	common_teardown
	local cg i
	[[ -f cgroups ]] || return 0
	while read -r cg; do
		# its last zombie (a watchdog not waited for) is reaped by init: bounded
		for ((i = 0; i < 250; i++)); do
			rmdir "$cg" 2>/dev/null && break
			[[ -d $cg ]] || break
			sleep 0.02
		done
	done <cgroups
}

@test "a descriptor limit at every step (ulimit -n): the command runs guarded or not at all, nothing stays held" {
	# Each limit makes a different set-up step fail (the signalfd, a socket, a renewal
	# thread's connection, the loss watch of several locks, a pipe, the watchdog's).
	local n st
	require_tool prlimit
	for ((n = 4; n <= 24; n++)); do
		st=0
		(clean_exec prlimit --nofile="$n" "$RLOCK" -k a -k b -- touch "ran.$n") \
			</dev/null >"out.$n" 2>"err.$n" || st=$?
		echo "# ulimit -n $n: status $st: $(head -c 160 "err.$n")" >&3
		if ((st == 0)); then
			[[ -e ran.$n ]] || fail "exit 0 but the command did not run (ulimit -n $n)"
		else
			[[ ! -e ran.$n ]] || fail "the command ran, yet rlock exited $st (ulimit -n $n)"
			[[ $st == 69 || $st == 71 ]] || fail "status $st with ulimit -n $n"
			assert_equal "$(wc -l <"err.$n")" 1
		fi
		key_absent 'rlock:{a}' || fail "lock a left held (ulimit -n $n)"
		key_absent 'rlock:{b}' || fail "lock b left held (ulimit -n $n)"
	done
}

@test "a replacement watchdog that never says ready (held in setsid) is not waited for past the lease's deadline: the command is stopped within the lease, not after 10 s" {
	command -v strace >/dev/null || skip "needs strace"
	make_step
	rlock_bg --pgrp -t 2s -k g -c './step; true'
	wait_until 30 test -e started
	local w spid start
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	# every watchdog rlock forks from now on is stopped in its setsid (never ready)
	strace -f -qq -o /dev/null -e trace=setsid -e inject=setsid:signal=SIGSTOP \
		-p "$RLOCK_PID" 2>strace.err &
	spid=$!
	wait_until 10 grep -q "TracerPid:[[:space:]]*$spid\$" "/proc/$RLOCK_PID/status" || {
		kill "$spid" 2>/dev/null
		skip "cannot trace rlock here: $(cat strace.err)"
	}
	start=$(now_ms)
	kill -KILL "$w"
	rlock_wait "$RLOCK_PID" 20 || {
		kill "$spid" 2>/dev/null
		fail "rlock still runs: $(cat "$RLOCK_ERR") $(cat strace.err)"
	}
	kill "$spid" 2>/dev/null || true
	wait "$spid" || true
	echo "# $(($(now_ms) - start)) ms, status $RLOCK_STATUS: $(cat "$RLOCK_ERR")" >&3
	# the lease's deadline (2 s) bounds the wait, then enforced: no renewal can be
	# told confirmed in time, the command stopped within the lease; no watchdog could
	# be started in its place: the host's fault, 71 (rlock(1)), said in a line
	(($(now_ms) - start < 5000)) || fail "waited for the stalled watchdog past the lease"
	assert_equal "$RLOCK_STATUS" 71
	grep -q 'no new one can be started (none said it was ready in time)' "$RLOCK_ERR" ||
		fail "no line names the watchdog: $(cat "$RLOCK_ERR")"
	step_dies "the command stopped with no watchdog to guard it"
}
