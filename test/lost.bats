#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Lost lease (SPEC §1.5, §5): when the token is gone or changed, or renewal cannot be
# confirmed, rlock signals the command's whole process group before the lease could
# expire (per --on-lost) and exits 79.

load helpers

setup() {
	common_setup
	# victim TAG [exit|exit0|ignore]: logs TERM/USR1/HUP with a timestamp (ms) to TAG.sig,
	# exits 128+N on them (0 with "exit0"; keeps running with "ignore"), writes TAG.pid, starts a
	# grandchild `sleep` in its process group (TAG.gpid), creates TAG.started, and
	# runs until TAG.release exists (at most 30 s).
	VICTIM=$BATS_TEST_TMPDIR/victim
	cat >"$VICTIM" <<'EOF_VICTIM'
#!/bin/bash
tag=$1 mode=${2:-exit}
on() {
	echo "$1 $(date +%s%3N)" >>"$tag.sig"
	[[ $mode == ignore ]] && return
	[[ $mode == exit0 ]] && exit 0
	exit $((128 + $2))
}
trap 'on TERM 15' TERM
trap 'on USR1 10' USR1
trap 'on HUP 1' HUP
echo $$ >"$tag.pid"
# a death_watch FIFO, when the test made one: held open by the whole group
if [[ -p dw ]]; then exec 9>dw; fi
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! >"$tag.gpid"
touch "$tag.started"
for ((i = 0; i < 1500; i++)); do
	[[ -e $tag.release ]] && break
	sleep 0.02
done
kill "$(cat "$tag.gpid")" 2>/dev/null # the lock covers the group until it is empty
exit 0
EOF_VICTIM
	chmod +x "$VICTIM"
}

teardown() {
	kill -CONT "$REDIS_PID" 2>/dev/null || true
	track_pidfile v.pid
	track_pidfile v.gpid
	common_teardown
}

start_victim() {
	rlock_bg "$@" -k l -- "$VICTIM" v "${VICTIM_MODE:-exit}"
	wait_until 30 test -e v.started
	track_pidfile v.pid
	track_pidfile v.gpid
}

# steal: another client takes the lock key, with a long TTL: tests read it back after
# rlock has exited, which takes seconds in a slow (TSan, valgrind) pass.
steal() {
	rcli SET 'rlock:{l}' stolen PX 600000 >/dev/null
}

# got_signal SIG: the command trapped SIG (its TAG.sig line); else fail showing what it
# got and rlock's stderr. Tests that check a trapped signal use a lease of 6 s: a
# catchable signal is followed by SIGKILL by 9/10 of the lease after the last renewal,
# and the trap of a bash command under load must run before that.
got_signal() {
	grep -q "^$1 " v.sig 2>/dev/null ||
		fail "the command did not trap SIG$1; v.sig: $(cat v.sig 2>&1); rlock stderr: $(cat "$RLOCK_ERR")"
}

assert_victim_gone() {
	wait_until 30 pidfile_gone v.pid || fail "the command survived the lost lock"
	wait_until 30 pidfile_gone v.gpid ||
		fail "a process in the command's group survived the lost lock"
}

@test "token replaced while running: command TERMed (whole group), exit 79" {
	start_victim -t 3s
	local t0 t_term
	# rlock's lease, renewed before t0 at the latest, ends by t0 + 3 s
	t0=$(now_ms)
	steal
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 79
	t_term=$(awk '/^TERM /{print $2; exit}' v.sig)
	[[ -n $t_term ]] || fail "the command never got SIGTERM"
	echo "# stolen token → command TERMed after $((t_term - t0)) ms (lease 3000 ms)" >&3
	((t_term - t0 < 3000)) ||
		fail "TERM came $((t_term - t0)) ms after the theft, when the lease could have ended"
	assert_victim_gone
	run grep -c '^TERM ' v.sig
	assert_output 1
	# the thief's lock is not touched
	assert_equal "$(rcli GET 'rlock:{l}')" stolen
	[[ -s $RLOCK_ERR ]] || fail "nothing on stderr about the lost lock"
}

@test "lost lease: 79 even when the command exits 0 on SIGTERM" {
	VICTIM_MODE=exit0 start_victim -t 6s
	steal
	rlock_wait "$RLOCK_PID" 30
	got_signal TERM
	assert_equal "$RLOCK_STATUS" 79
}

@test "lock deleted while running: exit 79, key not recreated" {
	start_victim -t 6s
	rcli DEL 'rlock:{l}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
	got_signal TERM
	key_absent 'rlock:{l}'
}

@test "TERM ignored: SIGKILL after --kill-after" {
	# (a lease long enough for the 1 s grace: SIGKILL lands by 9/10 of the lease after
	# the last confirmed renewal whatever --kill-after says; loss.bats tests that)
	VICTIM_MODE=ignore start_victim -t 4s --kill-after 1s
	steal
	rlock_wait "$RLOCK_PID" 30
	local t_exit
	t_exit=$(now_ms)
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
	local t_term
	t_term=$(awk '/^TERM /{print $2; exit}' v.sig)
	[[ -n $t_term ]] || fail "the command never got SIGTERM"
	echo "# TERM → rlock exit: $((t_exit - t_term)) ms (kill-after 1s)" >&3
	((t_exit - t_term >= 900)) || fail "SIGKILL came $((t_exit - t_term)) ms after TERM, before --kill-after 1s"
}

@test "--on-lost kill: SIGKILL at once, no TERM" {
	start_victim -t 1500ms --on-lost kill
	steal
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
	[[ ! -e v.sig ]] || fail "the command got a catchable signal: $(cat v.sig)"
}

@test "--on-lost USR1: that signal is sent" {
	start_victim -t 6s --on-lost USR1
	steal
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
	got_signal USR1
}

@test "--on-lost SIGHUP: SIG-prefixed names work" {
	start_victim -t 6s --on-lost SIGHUP
	steal
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
	got_signal HUP
}

@test "--on-lost ignore: warn only, command finishes, its status is returned" {
	start_victim -t 900ms --on-lost ignore
	steal
	# the warning appears once rlock notices (next renewal, ≤ ttl/3)
	wait_until 30 test -s "$RLOCK_ERR"
	pidfile_alive v.pid || fail "command was stopped despite --on-lost ignore"
	touch v.release
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -e v.sig ]] || fail "the command got a signal: $(cat v.sig)"
	assert_equal "$(rcli GET 'rlock:{l}')" stolen
}

@test "server frozen: command signalled before the lease can expire, exit 79" {
	death_watch
	start_victim -t 3s
	local t_stop
	kill -STOP "$REDIS_PID"
	t_stop=$(now_ms)
	# No renewal reaches the server after t_stop: the lease ends by t_stop + 3 s, and
	# the command's group must be dead by then: by its SIGTERM trap, or by the SIGKILL
	# that follows at 9/10 of the lease (on a loaded machine the trap may not get to run).
	dead_before $((t_stop + 3000)) "frozen server"
	kill -CONT "$REDIS_PID"
	if [[ -s v.sig ]]; then
		echo "# frozen server: SIGTERM trapped $(($(awk '{print $2; exit}' v.sig) - t_stop)) ms after the freeze" >&3
	fi
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
}

@test "server killed: command signalled, exit 79; lock gone" {
	# Run against a private server so that the per-file one survives.
	local main_pid=$REDIS_PID main_port=$REDIS_PORT main_url=$REDIS_URL
	redis_start
	local mine=$REDIS_PID
	start_victim -t 1500ms -u "$REDIS_URL"
	redis_stop "$mine"
	rlock_wait "$RLOCK_PID" 30
	REDIS_PID=$main_pid REDIS_PORT=$main_port REDIS_URL=$main_url
	assert_equal "$RLOCK_STATUS" 79
	assert_victim_gone
}

@test "acquire reply arrives after the lease expired: the command must not run" {
	# Every reply is held back 1.5 s: by the time rlock hears "acquired", its 1 s lease
	# has already expired on the server and another client may hold the lock. The lease
	# is only valid from when the request was sent: rlock must not start the command.
	delay_proxy_start 1500
	run rlock -u "$PROXY_URL" -t 1s -w 4s --io-timeout 5s -k l -- touch ran
	echo "# rlock exit status with 1.5 s reply delay and a 1 s lease: $status" >&3
	[[ ! -e ran ]] || fail "the command ran on a lease that had already expired (exit $status)"
	((status != 0)) || fail "exit 0 without holding the lock"
}
