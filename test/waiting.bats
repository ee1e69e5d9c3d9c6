#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Waiting (SPEC §4): waiters subscribe to the release notification and take over about
# one round trip after the holder releases; they also take over when a dead holder's
# lease expires. Latencies are printed (# handoff ms), only the order is asserted.

load helpers

# subscribed [N]: at least N rlocks wait for lock w's release
subscribed() { (($(waiters w) >= ${1:-1})); }

@test "hand-off: waiter starts right after the holder releases" {
	local a_pid b_pid ms all=()
	for _ in 1 2 3 4 5; do
		rm -f a.* b.*
		rlock_bg -k w -- "$HOLD" a
		a_pid=$RLOCK_PID
		wait_until 30 test -e a.started
		rlock_bg -k w -- sh -c 'date +%s%3N >b.start'
		b_pid=$RLOCK_PID
		wait_until 30 subscribed
		[[ ! -e b.start ]] || fail "waiter ran while the lock was held"
		touch a.release
		rlock_wait "$a_pid" 30
		assert_equal "$RLOCK_STATUS" 0
		rlock_wait "$b_pid" 30
		assert_equal "$RLOCK_STATUS" 0
		(($(cat b.start) >= $(cat a.end))) || fail "waiter started before the holder ended"
		ms=$(($(cat b.start) - $(cat a.end)))
		all+=("$ms")
	done
	# baseline: an uncontended run, rlock start → command start (process start-up,
	# connect, acquire, fork/exec): hand-off minus this is the wake-up cost
	local t0 base=()
	for _ in 1 2 3; do
		t0=$(now_ms)
		run -0 rlock -k other -- sh -c 'date +%s%3N'
		base+=("$((output - t0))")
	done
	echo "# handoff ms: ${all[*]} (holder's command ends → waiter's command starts)" >&3
	echo "# uncontended start ms: ${base[*]} (rlock starts → command starts)" >&3
}

@test "waiters are quiet on stderr unless -v (non-interactive)" {
	rlock_bg -k w -- "$HOLD" a
	local a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -k w -- true
	local b_pid=$RLOCK_PID b_err=$RLOCK_ERR
	rlock_bg -v -k w -- true
	local c_pid=$RLOCK_PID c_err=$RLOCK_ERR
	wait_until 30 subscribed 2
	touch a.release
	rlock_wait "$a_pid" 30
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$c_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $b_err ]] || fail "a waiter without -v wrote to stderr: $(cat "$b_err")"
	[[ -s $c_err ]] || fail "a waiter with -v said nothing on stderr"
}

@test "holder SIGKILLed: the waiter takes over once the lease expires" {
	# (2 s: the lease must be renewed while the waiter starts, before the kill; a 1 s one
	# lost on a loaded TSan pass hands the lock over before the kill, correctly)
	rlock_bg -t 2s -k w -- "$HOLD" a
	local a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	track_pidfile a.pid
	rlock_bg -k w -- sh -c 'date +%s%3N >b.start'
	local b_pid=$RLOCK_PID
	wait_until 30 subscribed
	local t_kill
	t_kill=$(now_ms)
	kill -KILL "$a_pid"
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	(($(cat b.start) >= t_kill)) || fail "waiter started before the holder was killed"
	echo "# takeover after SIGKILLed holder (ttl 2s): $(($(cat b.start) - t_kill)) ms" >&3
}

@test "foreign holder without notification: the waiter takes over at expiry" {
	local t_set
	t_set=$(now_ms) # before the SET: the key cannot expire before t_set + 1500
	rcli SET 'rlock:{w}' foreign PX 1500 >/dev/null
	run -0 rlock -w 20s -k w -- sh -c 'date +%s%3N'
	local started=$output
	echo "# takeover at expiry of a 1500 ms foreign lock: $((started - t_set)) ms after SET" >&3
	((started - t_set >= 1500)) || fail "acquired after only $((started - t_set)) ms"
}

@test "several waiters all run, one after the other" {
	rlock_bg -k w -- "$HOLD" a
	local a_pid=$RLOCK_PID pids=() i
	wait_until 30 test -e a.started
	for i in 1 2 3 4; do
		# shellcheck disable=SC2016
		rlock_bg -k w -- sh -c 'mkdir in.cs || echo overlap >>overlaps; date +%s%3N >>starts; sleep 0.1; rmdir in.cs'
		pids+=("$RLOCK_PID")
	done
	wait_until 30 subscribed 4
	touch a.release
	rlock_wait "$a_pid" 30
	for i in "${pids[@]}"; do
		rlock_wait "$i" 20
		assert_equal "$RLOCK_STATUS" 0
	done
	assert_equal "$(wc -l <starts)" 4
	[[ ! -e overlaps ]] || fail "two waiters were in the critical section at once"
}

@test "no lost wake-up: 30 short holders and waiters back to back" {
	local i pids=()
	for i in $(seq 30); do
		# (-w bounds a stuck waiter; 30 hand-offs under TSan on a loaded machine took 25 s)
		rlock_bg -w 120s -k w -- sh -c 'n=$(cat n 2>/dev/null || echo 0); echo $((n + 1)) >n'
		pids+=("$RLOCK_PID")
	done
	for i in "${pids[@]}"; do
		rlock_wait "$i" 150
		assert_equal "$RLOCK_STATUS" 0
	done
	assert_equal "$(cat n)" 30
}

@test "a waiter that gives up after an outage (69: the server paused past its -w, its scripts flushed) leaves: its writer mark goes when the server wakes, not 5 s later" {
	rlock_bg -s -k w -t 30s -- "$HOLD" s
	local s_pid=$RLOCK_PID
	wait_until 10 test -e s.started
	rlock_bg -k w -t 30s -w 1500ms --io-timeout 200ms -- true
	local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 10 key_exists 'rlock:{w}:writer'
	# the leave's script not loaded: sent by its SHA, its NOSCRIPT would go unread
	rcli SCRIPT FLUSH >/dev/null
	kill -STOP "$REDIS_PID"
	rlock_wait "$w_pid" 20
	kill -CONT "$REDIS_PID"
	assert_equal "$RLOCK_STATUS" 69
	# the mark lives 5 s from the last attempt: gone within 2 s is the leave's doing
	wait_until 2 key_absent 'rlock:{w}:writer' ||
		fail "writer mark left: PTTL $(rcli PTTL 'rlock:{w}:writer'); $(cat "$w_err")"
	touch s.release
	rlock_wait "$s_pid" 30
	assert_equal "$RLOCK_STATUS" 0
}

@test "--fair and --preempt waiters whose leave the paused server answers late (its scripts flushed: NOSCRIPT): their queue place and request go when it wakes, not at their lease's end" {
	rlock_bg -k f -t 30s -- "$HOLD" f
	local f_pid=$RLOCK_PID
	rlock_bg -k p -t 30s --preemptible -- "$HOLD" p
	local p_pid=$RLOCK_PID
	wait_until 10 test -e f.started -a -e p.started
	rlock_bg --fair -k f -t 30s -w 1500ms --io-timeout 200ms -- true
	local a_pid=$RLOCK_PID
	rlock_bg --preempt -k p -t 30s -w 1500ms --io-timeout 200ms -- true
	local b_pid=$RLOCK_PID
	wait_until 10 key_exists 'rlock:{f}:queue'
	wait_until 10 key_exists 'rlock:{p}:preempt'
	rcli SCRIPT FLUSH >/dev/null
	kill -STOP "$REDIS_PID"
	rlock_wait "$a_pid" 20
	rlock_wait "$b_pid" 20
	kill -CONT "$REDIS_PID"
	local k
	for k in 'rlock:{f}:queue' 'rlock:{f}:qlease' 'rlock:{f}:qmeta' 'rlock:{p}:preempt' 'rlock:{p}:waiters'; do
		wait_until 2 key_absent "$k" || fail "$k left: PTTL $(rcli PTTL "$k")"
	done
	touch f.release p.release
	rlock_wait "$f_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$p_pid" 30
	assert_equal "$RLOCK_STATUS" 0
}
