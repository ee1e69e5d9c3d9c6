#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# What rlock says it does (issue 14 items 5, 16): -v names the server and where its
# URL came from, the wait and how long getting the lock took, a skip with -n -E 0,
# the release; -vv adds renewals. Hints for the common mistakes: a plain client on a
# TLS port.

load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	tls_redis_start
	export TLS_ONLY_PORT=$TLS_PORT
	redis_start
}

@test "-v: server and URL source, got the lock after N s, released" {
	run -0 --separate-stderr rlock -v -k v -- true
	# (other -v lines, e.g. about --kill-after, may come between)
	assert_equal "${stderr_lines[0]}" "rlock: server $REDIS_URL (URL from REDIS_URL)"
	assert_regex "${stderr_lines[1]}" '^rlock: got the lock rlock:\{v\} after [0-9]+\.[0-9] s \(fence 1, ttl 30000 ms\)$'
	assert_equal "${stderr_lines[-1]}" 'rlock: released rlock:{v}'
	# without -v: nothing
	run -0 --separate-stderr rlock -k v -- true
	assert_equal "$stderr" ''
}

@test "-v: a wait is announced, and 'got the lock after' says how long it took" {
	rlock_bg -k w -t 20s -- "$HOLD" first
	local holder=$RLOCK_PID
	wait_until 10 test -e first.started
	rlock_bg -v -k w -- "$HOLD" second
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	wait_until 10 grep -q 'is busy' "$waiter_err"
	sleep 0.3 # a wait long enough to show up in the figure
	touch first.release second.release
	rlock_wait "$holder"
	rlock_wait "$waiter"
	assert_equal "$RLOCK_STATUS" 0
	grep -q "^rlock: lock 'w' is busy (held by .* pid [0-9]*); waiting$" "$waiter_err" ||
		fail "no waiting line: $(cat "$waiter_err")"
	local took
	took=$(sed -n 's/^rlock: got the lock rlock:{w} after \([0-9.]*\) s .*/\1/p' "$waiter_err")
	[[ -n $took ]] || fail "no 'got the lock after': $(cat "$waiter_err")"
	echo "# waited ${took} s" >&3
	[[ $took != 0.0 ]] || fail "a wait of at least 0.3 s reported as $took s"
	grep -qx 'rlock: released rlock:{w}' "$waiter_err"
}

@test "-v with -n -E 0: the skip is said (and nothing without -v)" {
	rcli SET 'rlock:{s}' someone PX 60000 >/dev/null
	run -0 --separate-stderr rlock -n -E 0 -k s -- touch ran
	assert_equal "$stderr" ''
	run -0 --separate-stderr rlock -v -n -E 0 -k s -- touch ran
	assert_regex "$stderr" "lock 's' is busy.*; skipped \(-E 0\)"
	[[ ! -e ran ]]
}

@test "-v with --min-hold: the release says how long the lock is kept" {
	run -0 --separate-stderr rlock -v --min-hold 20s -k m -- true
	assert_regex "$stderr" 'released rlock:\{m\}; --min-hold keeps it [0-9]+\.[0-9] s more'
}

@test "-vv adds the renewals; -v does not show them" {
	# The command runs until two renewals happened (the key's PTTL went up twice; the
	# first is logged before the second is sent): a fixed run over a lease short
	# enough to renew in it could lose the lease on a slow pass.
	local until_renewed='p0=$(redis-cli -u "$REDIS_URL" PTTL "$RLOCK_KEY"); i=0 ups=0
		while [ $i -lt 1000 ]; do
			p=$(redis-cli -u "$REDIS_URL" PTTL "$RLOCK_KEY")
			[ "$p" -gt "$p0" ] && ups=$((ups + 1)) && [ $ups -ge 2 ] && exit 0
			p0=$p; sleep 0.02; i=$((i + 1))
		done; exit 1'
	run -0 --separate-stderr rlock -vv -t 1500ms -k r -c "$until_renewed"
	local n
	n=$(grep -c '^rlock: renewed rlock:{r}$' <<<"$stderr" || true)
	echo "# $n renewals shown" >&3
	((n >= 1)) || fail "no renewal shown: $stderr"
	run -0 --separate-stderr rlock -v -t 1500ms -k r -c "$until_renewed"
	refute_output --partial renewed
	[[ $stderr != *renewed* ]]
}

@test "a plain client on a TLS port: 69 with a hint about rediss://" {
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$TLS_ONLY_PORT" \
		--connect-timeout 2s --io-timeout 2s -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'rediss:// or --tls'
	[[ ! -e ran ]]
}

@test "a server answering with a TLS alert (0x15 0x03): 69, 'answered with TLS', hint" {
	HPORT=$(free_port)
	perl "$BATS_TEST_DIRNAME/hostile-server.pl" "$HPORT" tlsalert "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	wait_until 10 test -e "$BATS_TEST_TMPDIR/ready"
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$HPORT" --io-timeout 2s -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "127\.0\.0\.1:$HPORT answered with TLS \(is it a TLS port\? then use rediss:// or --tls\)"
	[[ ! -e ran ]]
}
