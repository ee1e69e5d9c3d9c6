#!/usr/bin/env bats
# A waiter: survives a Redis restart within its --wait (and names the lock when it
# gives up), keeps its backoff against a hostile PTTL, and draws its live line only
# where it belongs: one row of the terminal's width, in the foreground, never with
# TERM=dumb, holder text escaped.

# shellcheck disable=SC2154,SC2153,SC2034,SC2030,SC2031  # bats sets $stderr, run sets $status (also in a helper); helpers set REDIS_DIR, read HOLDER_PID
load helpers

# foreign KEY: make the lock busy by hand (a holder that never releases, long TTL).
foreign() { rcli SET "rlock:{$1}" foreign-token PX 600000 >/dev/null; }

has_waiter() { [[ $(waiters "$1") -ge 1 ]]; }

# restart_redis: stop the test server and start a fresh one on the same port (no
# persistence: the keyspace comes back empty, as after a crash).
# shellcheck disable=SC2153  # REDIS_DIR is exported by redis_start
restart_redis() {
	redis_stop "$REDIS_PID"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --dir "${REDIS_DIR:?}" </dev/null >>"${REDIS_DIR:?}/redis.log" 2>&1 3>&- 4>&- &
	REDIS_PID=$!
	remember_server "$REDIS_PID"
	echo "$REDIS_PID" >"$BATS_FILE_TMPDIR/redis.current" # for the next tests' setup
	wait_until 30 _redis_is "$REDIS_PID" -p "$REDIS_PORT"
}

setup() {
	# a test may have restarted the server (same port, new pid)
	if [[ -s $BATS_FILE_TMPDIR/redis.current ]]; then
		REDIS_PID=$(cat "$BATS_FILE_TMPDIR/redis.current")
	fi
	common_setup
}

teardown() {
	[[ -z ${TMUX_SOCK:-} ]] || tmux -S "$TMUX_SOCK" kill-server 2>/dev/null || true
	common_teardown
	# a test that stopped the server (and failed before restarting it) leaves one
	# for the next test
	_redis_is "$REDIS_PID" -p "$REDIS_PORT" || restart_redis
}

# ---------------------------------------------------------------------------------
# a Redis blip while waiting (issue 14 item 9)

@test "a waiter survives a Redis restart within --wait and acquires afterwards" {
	foreign w
	rlock_bg -w 30s -k w -- touch ran
	wait_until 30 has_waiter w
	restart_redis
	# the restarted server is empty: the lock is free, the waiter takes it
	rlock_wait "$RLOCK_PID" 25
	assert_equal "$RLOCK_STATUS" 0
	[[ -e ran ]] || fail "the command did not run"
	# nothing but the outage's two lines (issue 27: one when it starts, one when it ends)
	run grep -cv -e "; retrying for up to" -e " answers again after " "$RLOCK_ERR"
	assert_output 0
}

@test "a waiter without --wait survives a server that is down for a while" {
	foreign w
	rlock_bg -v -k w -- touch ran
	wait_until 30 has_waiter w
	redis_stop "$REDIS_PID"
	# down long enough for several failed reconnects
	wait_until 30 grep -q "; retrying (no --wait deadline)" "$RLOCK_ERR"
	sleep 1.5 # the outage lasts: attempts fail while nothing listens
	proc_alive "$RLOCK_PID" || fail "the waiter gave up: $(cat "$RLOCK_ERR")"
	restart_redis
	rlock_wait "$RLOCK_PID" 25
	assert_equal "$RLOCK_STATUS" 0
	[[ -e ran ]]
	grep -q "lock 'w': 127.0.0.1:$REDIS_PORT answers again after" "$RLOCK_ERR" || fail "$(cat "$RLOCK_ERR")"
	assert_equal "$(grep -c "retrying" "$RLOCK_ERR")" 1
}

@test "a waiter whose server never comes back exits 69 at the --wait deadline, naming the lock" {
	foreign w
	local t0
	t0=$(now_ms)
	rlock_bg -w 3s -k w -- touch ran
	wait_until 30 has_waiter w
	redis_stop "$REDIS_PID"
	rlock_wait "$RLOCK_PID" 20
	local took=$(($(now_ms) - t0))
	echo "exited after ${took} ms (wait 3000 ms)"
	assert_equal "$RLOCK_STATUS" 69
	((took >= 2900)) || fail "gave up before the --wait deadline: $took ms"
	[[ ! -e ran ]]
	run cat "$RLOCK_ERR"
	assert_line --index 0 --regexp "^rlock: lock 'w': .*; retrying for up to [0-9.]+ s \(--wait\)$"
	assert_line --index 1 --regexp "^rlock: lock 'w': Redis unavailable while waiting"
	assert_equal "${#lines[@]}" 2
}

# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }

@test "a lock freed without a release notification 800 ms before the -w deadline is taken by a last attempt, not given up on (75)" {
	# the backoff's naps grow to 5 s: one that would run into the deadline ends 250 ms
	# before it (a last attempt), not at it. Three times: the backoff is jittered.
	local i t0
	for i in 1 2 3; do
		foreign "q$i"
		t0=$(now_ms)
		rlock_bg -w 7s -k "q$i" -- touch "ran$i"
		wait_until 10 has_waiter "q$i"
		wait_until 10 past $((t0 + 6200))
		rcli DEL "rlock:{q$i}" >/dev/null # a flush, an eviction: nobody publishes
		rlock_wait "$RLOCK_PID" 15
		[[ -e ran$i ]] || fail "try $i: the lock was free before the deadline, rlock gave up ($RLOCK_STATUS): $(cat "$RLOCK_ERR")"
		assert_equal "$RLOCK_STATUS" 0
	done
}

@test "a holder's lease that ends 150 ms before the -w deadline: the waiter wakes at its end and takes the lock (the last try does not come earlier)" {
	# the waiter wakes when the holder's PTTL says the lease ends; a wake-up inside the
	# last 250 ms of the wait is kept, not moved to the last try's time (which found
	# the lock still held, and then only the deadline was left: 75)
	local round # (bats' run sets i)
	for round in 1 2; do
		rcli SET "rlock:{e$round}" foreign-token PX 5850 >/dev/null
		run -0 --separate-stderr rlock -w 6s -k "e$round" -- touch "ran$round"
		[[ -e ran$round ]] || fail "try $round: not taken at the lease's end: $stderr"
	done
}

@test "with -n, a dead server is 69 at once (with a wait, the first connect is part of it: blip.bats)" {
	local port
	port=$(dead_port)
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$port" -n -k w -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
}

# ---------------------------------------------------------------------------------
# a hostile PTTL (issue 7 item 11)

# hostile_busy PTTL: the fake server of hostile-server.pl answering every acquire
# "busy, PTTL ms left"; sets HPORT and HCOUNT (one line per acquire attempt).
hostile_busy() {
	HPORT=$(free_port)
	HOSTILE_PTTL=$1 HOSTILE_PID=${2:-4242} perl "$BATS_TEST_DIRNAME/hostile-server.pl" \
		"$HPORT" busy "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	HCOUNT=$BATS_TEST_TMPDIR/ready.count
	wait_until 30 test -e "$BATS_TEST_TMPDIR/ready"
}

# backoff_holds PTTL MAX: against a server that answers every acquire "busy, PTTL ms
# left", a 3 s wait makes at most MAX attempts and ends 75 without running anything.
backoff_holds() {
	hostile_busy "$1"
	run --separate-stderr rlock -u "redis://127.0.0.1:$HPORT" -w 3s -k h -- touch ran
	local n
	n=$(wc -l <"$HCOUNT")
	echo "$n acquire attempts in 3 s; exit $status; $stderr"
	[[ ! -e ran ]]
	((n <= $2)) || fail "$n attempts in 3 s: the backoff does not hold"
	assert_equal "$status" 75
}

@test "PTTL INT64_MAX: no overflow, the backoff holds" {
	# backoff 200 ms doubling to 5 s: about 5; a spin makes thousands
	backoff_holds 9223372036854775807 30
}

@test "PTTL 0 again and again: the backoff holds" {
	backoff_holds 0 40
}

@test "a server that stalls the waiter's listener (SUBSCRIBE, BLPOP): -w still bounds the wait, not --io-timeout (75)" {
	HPORT=$(free_port)
	HOSTILE_PTTL=600000 perl "$BATS_TEST_DIRNAME/hostile-server.pl" \
		"$HPORT" busymute "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	wait_until 30 test -e "$BATS_TEST_TMPDIR/ready"
	local mode t0 took args
	for mode in exclusive --fair -s; do
		args=()
		[[ $mode == exclusive ]] || args=("$mode")
		t0=$(now_ms)
		run -75 --separate-stderr rlock -u "redis://127.0.0.1:$HPORT" --io-timeout 8s -w 1 \
			-k m "${args[@]}" -- touch ran
		took=$(($(now_ms) - t0))
		echo "# $mode: 75 after $took ms" >&3
		[[ ! -e ran ]]
		((took < 7000)) || fail "$mode: -w 1 gave up after $took ms (--io-timeout 8s)"
	done
}

@test "a notification cut off in the middle (its first bytes, then nothing): -w still bounds the wait (75), SUBSCRIBE and BLPOP alike" {
	local mode t0 took args placed
	for mode in exclusive --fair -s placed; do
		HPORT=$(free_port)
		placed=
		[[ $mode != placed ]] || placed=1
		HOSTILE_PLACED=$placed HOSTILE_PTTL=600000 perl "$BATS_TEST_DIRNAME/hostile-server.pl" \
			"$HPORT" busysplit "$BATS_TEST_TMPDIR/ready.$mode" 3>&- 4>&- &
		track_pid $!
		wait_until 30 test -e "$BATS_TEST_TMPDIR/ready.$mode"
		args=()
		[[ $mode == exclusive || $mode == placed ]] || args=("$mode")
		t0=$(now_ms)
		run --separate-stderr timeout -s KILL 10 "$RLOCK" -u "redis://127.0.0.1:$HPORT" \
			-w 1 -k m "${args[@]}" -- touch ran
		took=$(($(now_ms) - t0))
		echo "# $mode: $status after $took ms" >&3
		[[ ! -e ran ]]
		((status == 75)) || fail "$mode: exit $status after $took ms (-w 1): $stderr"
		((took < 4000)) || fail "$mode: -w 1 gave up after $took ms"
	done
}

@test "a listener the server drops at once (maxclients reached: ERR, then closed) makes the waiter back off, not retry 7 times a second; it takes the lock when the lease ends" {
	# no handshake on the listener's connection (no password): the refusal comes as
	# the reply to BLPOP, after the waiter started listening
	rcli SET 'rlock:{w}' foreign-token PX 5000 >/dev/null
	rcli CONFIG RESETSTAT >/dev/null
	rcli CONFIG SET maxclients 1 >/dev/null # the waiter's own connection only
	run --separate-stderr rlock -w 20s -k w -- touch ran
	rcli CONFIG SET maxclients 10000 >/dev/null
	local refused
	refused=$(rcli INFO stats | tr -d '\r' | sed -n 's/^rejected_connections://p')
	echo "exit $status; $refused connections refused; $stderr"
	assert_equal "$status" 0
	[[ -e ran ]]
	# backoff 200 ms doubling to 5 s: about 6 in the lease's 5 s; before: 35
	((refused <= 15)) || fail "$refused listeners opened in 5 s: the backoff does not grow"
}

# ---------------------------------------------------------------------------------
# the live line (issue 14 item 4, issue 7 item 14)

# tmux_start W CMD: run CMD in a detached tmux pane W columns wide (a private tmux
# server on its own socket, killed in teardown). The pane's shell lingers after CMD:
# tmux may drop the last output of a pane whose process has exited.
tmux_start() {
	require_tool tmux
	TMUX_SOCK=$BATS_TEST_TMPDIR/tmux.sock
	tmux -S "$TMUX_SOCK" -f /dev/null new-session -d -x "$1" -y 20 "$2; sleep 60"
}
pane() { tmux -S "$TMUX_SOCK" capture-pane -p; }
pane_has() { pane | grep -q "$1"; }

# A holder whose recorded command line is long: the live line is ~150 columns.
long_holder() {
	rlock_bg -k w -- "$HOLD" w 0 "this-argument-makes-the-command-line-long-enough-to-wrap-an-80-column-terminal-twice-over"
	wait_until 30 test -e "$BATS_TEST_TMPDIR/w.started"
	track_pidfile "$BATS_TEST_TMPDIR/w.pid"
}

# released_all: the holder has exited and the waiter in the pane has released (the
# test must not end while either may still be releasing)
released_all() {
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 0
	wait_until 20 key_absent 'rlock:{w}'
}

@test "an 80-column pane holds the live line on one row, redrawn in place" {
	long_holder
	tmux_start 80 "env TERM=xterm '$RLOCK' -k w -- echo acquired"
	wait_until 30 pane_has "rlock: waiting"
	# a few redraws later (a loaded machine may skip a second: any count from 3 s on)
	wait_until 20 pane_has "waiting \([3-9]\|[1-9][0-9]\+\)s"
	pane
	local rows
	rows=$(pane | grep -c .)
	assert_equal "$rows" 1
	(($(pane | awk '{ print length }' | sort -n | tail -1) <= 80))
	touch w.release
	wait_until 30 pane_has acquired
	run ! pane_has "rlock: waiting"
	released_all
}

@test "a background waiter draws nothing over the prompt" {
	long_holder
	# job control: the waiter runs in its own process group, not the terminal's
	tmux_start 200 "bash --norc -c 'set -m; env TERM=xterm \"$RLOCK\" -k w -- echo acquired & sleep 2.5; echo observed; wait'"
	wait_until 30 has_waiter w
	wait_until 30 pane_has observed
	pane
	run ! pane_has "rlock: waiting"
	touch w.release
	wait_until 30 pane_has acquired
	released_all
}

@test "TERM=dumb: no live line" {
	long_holder
	tmux_start 200 "env TERM=dumb '$RLOCK' -k w -- echo acquired"
	wait_until 30 has_waiter w
	sleep 1.5 # observation window: the line would have been drawn by now
	pane
	run ! pane_has "rlock: waiting"
	touch w.release
	wait_until 30 pane_has acquired
	released_all
}

@test "holder fields are escaped in the live line (pid too)" {
	hostile_busy 60000 $'66\e]2;pwned\a\e[31mRED'
	(clean_exec script -qfec "env TERM=xterm $RLOCK -u redis://127.0.0.1:$HPORT -w 2s -k h -- true" /dev/null) \
		</dev/null >tty.out 2>&1 &
	local tty_pid=$!
	track_pid "$tty_pid"
	rlock_wait "$tty_pid" 30
	cat -A tty.out
	grep -q 'rlock: waiting' tty.out || fail "no live line"
	# the only escape sequence is rlock's own "erase line"
	run ! grep -q $'\e]' tty.out
	run ! grep -q $'\e\\[31m' tty.out
	# the pid is parsed once as a number (issue 9): a forged one is unknown, shown '?'
	grep -q 'pid ? ' tty.out || fail "forged pid not shown as unknown"
}

# ---------------------------------------------------------------------------------
# what rlock learns of the server off the command's path (cluster_seed.bats: why)

@test "a standalone server: a run shorter than its first renewal asks it nothing more; a longer one and a waiter learn it is no Cluster by INFO, never by a refused CLUSTER SLOTS" {
	rcli CONFIG RESETSTAT >/dev/null
	run rlock -k short -- true
	assert_success
	run ! grep -q '^cmdstat_info:' <(rcli INFO commandstats)
	rlock_bg -vv -k learn -t 3s -- "$HOLD" a
	local a_pid=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 grep -q 'is no Cluster node' "$a_err"
	rlock_bg -vv -w 60s -k learn -- true
	local b_pid=$RLOCK_PID b_err=$RLOCK_ERR
	wait_until 30 grep -q 'is no Cluster node' "$b_err" || { cat "$b_err"; false; }
	touch a.release
	rlock_wait "$a_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rcli INFO commandstats | grep -q '^cmdstat_info:'
	run ! grep -q '^cmdstat_cluster' <(rcli INFO commandstats)
	run ! grep -q 'cluster support disabled' <(rcli INFO errorstats)
}
