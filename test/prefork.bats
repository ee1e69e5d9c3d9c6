#!/usr/bin/env bats
# Before the command starts: a terminating signal ends every wait at once (connect,
# acquire, WAIT, --status, --break, --list), gives back a lock an interrupted acquire
# may have taken, and rlock dies of the signal (128+N, nothing on stderr); a lease
# that ran out during the steps before the fork (a slow WAIT) is not used.

# shellcheck disable=SC2154  # bats sets $stderr (run --separate-stderr)
load helpers

# server_has_request: the test server's side of a connection holds unread bytes
# (rlock's request arrived while the server is stopped).
server_has_request() {
	ss -Htn state established "( sport = :$REDIS_PORT )" | awk '$1 > 0 { f = 1 } END { exit !f }'
}

# places NAME N: lock NAME has N places among its waiters.
places() { [[ $(rcli ZCARD "rlock:{$1}:waiters") == "$2" ]]; }

# term_and_expect SIG STATUS: send SIG to the background rlock; it must be gone
# within 5 s (its own deadlines are 30 s) with STATUS and an empty stderr.
term_and_expect() {
	local t0
	t0=$(now_ms)
	kill "-$1" "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 5 || fail "still running 5 s after SIG$1: $(cat "$RLOCK_ERR")"
	echo "gone $(($(now_ms) - t0)) ms after SIG$1"
	assert_equal "$RLOCK_STATUS" "$2"
	assert_equal "$(cat "$RLOCK_ERR")" ""
}

@test "SIGTERM during a connect that hangs: dies of it at once, command not run" {
	local port
	port=$(free_port)
	perl "$BATS_TEST_DIRNAME/blackhole.pl" "$port" bh.ready 3>&- 4>&- &
	track_pid $!
	wait_until 30 test -e bh.ready
	rlock_bg -u "redis://127.0.0.1:$port" --connect-timeout 30s -k p -- touch ran
	wait_until 30 sh -c "ss -Htn state syn-sent '( dport = :$port )' | grep -q ."
	term_and_expect TERM 143
	[[ ! -e ran ]]
}

@test "SIGTERM while the acquire waits for its reply: dies at once; the request is given back" {
	run -0 rlock -k warm -- true # the scripts are cached: EVALSHA runs as sent
	kill -STOP "$REDIS_PID"
	rlock_bg --io-timeout 30s -k p -- touch ran
	wait_until 30 server_has_request
	term_and_expect TERM 143
	kill -CONT "$REDIS_PID"
	[[ ! -e ran ]]
	# the server ran the acquire (the fence counts it), then the release sent after it
	wait_until 30 sh -c "[ \"\$(redis-cli -p $REDIS_PORT GET 'rlock:{p}:fence')\" = 1 ]"
	key_absent 'rlock:{p}'
}

@test "SIGTERM while a waiting acquire's reply is on its way: the place it took among the waiters is left" {
	rcli SET 'rlock:{p}' foreign PX 600000 >/dev/null
	run -75 rlock -w 100ms -k p -- true # the scripts are cached: EVALSHA runs as sent
	assert_equal "$(rcli ZCARD 'rlock:{p}:waiters')" 0
	# requests pass at once, replies come 6 s late: the first attempt has taken its
	# place on the server, and rlock still waits for the answer (5 s at most)
	delay_proxy_start 6000
	rlock_bg -u "$PROXY_URL" --io-timeout 5s -k p -- touch ran
	wait_until 30 places p 1
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 143
	[[ ! -e ran ]]
	# else the place lives on for its lease (the ttl, 30 s): a release wakes it, nobody
	# tries, and the next live waiter waits for its safety-net timer
	wait_until 5 places p 0 ||
		fail "the place was left behind: $(rcli ZRANGE 'rlock:{p}:waiters' 0 -1)"
	assert_equal "$(rcli GET 'rlock:{p}')" foreign
}

@test "SIGINT during --status and --break against a stopped server: dies of it at once" {
	kill -STOP "$REDIS_PID"
	rlock_bg --io-timeout 30s -k p --status
	wait_until 30 server_has_request
	term_and_expect INT 130
	rlock_bg --io-timeout 30s -k p --break
	wait_until 30 server_has_request # the first connection is closed by now
	term_and_expect TERM 143
	kill -CONT "$REDIS_PID"
}

@test "SIGTERM during --list against a SCAN that never ends: dies of it at once" {
	local port
	port=$(free_port)
	perl "$BATS_TEST_DIRNAME/hostile-server.pl" "$port" scan "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	wait_until 30 test -e ready
	rlock_bg -u "redis://127.0.0.1:$port" --list
	wait_until 30 file_has_lines ready.count 50
	term_and_expect TERM 143
}

@test "SIGTERM during WAIT for replicas: dies at once, the lock is given back" {
	rlock_bg --wait-replicas 1 --io-timeout 30s -k p -- touch ran
	wait_until 30 key_exists 'rlock:{p}'
	term_and_expect TERM 143
	[[ ! -e ran ]]
	key_absent 'rlock:{p}'
}

@test "SIGTERM while waiting for a busy lock: dies of it, nothing on stderr" {
	rcli SET 'rlock:{p}' foreign PX 600000 >/dev/null
	rlock_bg -k p -- touch ran
	# shellcheck disable=SC2016  # expanded by eval
	wait_until 30 eval '[[ $(waiters p) == 1 ]]'
	term_and_expect TERM 143
	[[ ! -e ran ]]
}

@test "--wait-replicas: a WAIT that returns after the lease is (nearly) over does not start the command" {
	local master_port=$REDIS_PORT
	redis_start --replicaof 127.0.0.1 "$master_port"
	wait_until 20 sh -c "redis-cli -p $REDIS_PORT info replication | grep -q master_link_status:up"
	# every reply 500 ms late: the acquire's in time for a 1 s lease, WAIT's is not
	delay_proxy_start 500 "$master_port"
	run --separate-stderr rlock -u "$PROXY_URL" -t 1s --wait-replicas 1 -k late -- touch ran
	echo "exit $status: $stderr"
	[[ ! -e ran ]] || fail "the command ran on a lease that was nearly over"
	assert_equal "$status" 69
	assert_one_line_error
	assert_regex "$stderr" 'lease'
	# given back
	wait_until 30 sh -c "[ \"\$(redis-cli -p $master_port EXISTS 'rlock:{late}')\" = 0 ]"
	redis_stop "$REDIS_PID"
}
