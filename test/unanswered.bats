#!/usr/bin/env bats
# An acquire whose reply never comes (the server stalls past --io-timeout) may still
# have taken the lock on the server. rlock must not leave that lock to nobody until
# its ttl ends: on exit (69) it gives it back behind the unanswered request, and a
# waiter that tries again finds the lock under its own token and takes it as its own.

load helpers

setup_file() { common_setup_file; } # TCP: the delay proxy forwards to its port

# fence_is NAME N: lock NAME's fence counter is N.
fence_is() { [[ $(rcli GET "rlock:{$1}:fence") == "$2" ]]; }
# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }

@test "-n, the acquire's reply comes too late: 69, and the lock it took is given back behind it" {
	run -0 rlock -k warm -- true # the scripts are cached: EVALSHA runs as sent
	# requests pass at once, replies come 3 s late
	delay_proxy_start 3000
	run -69 --separate-stderr rlock -u "$PROXY_URL" --io-timeout 1s -n -k g -- touch ran
	[[ ! -e ran ]]
	# the server ran the acquire (the fence counts it), then the release sent after it
	wait_until 10 fence_is g 1
	key_absent 'rlock:{g}' || fail "the lock was left held for its ttl: $(rcli PTTL 'rlock:{g}') ms"
}

@test "a waiter's attempt times out but took the lock: its next attempt takes it as its own" {
	# a foreign holder whose lease ends while the server is stopped (below)
	local expiry
	expiry=$(($(now_ms) + 3000))
	rcli SET 'rlock:{w}' foreign PX 3000 >/dev/null
	rlock_bg -v --io-timeout 1s -w 60s -t 60s -k w -- touch ran
	wait_until 30 grep -q 'busy' "$RLOCK_ERR"
	kill -STOP "$REDIS_PID"
	# its attempts at the lease's end time out (one, then one on a fresh connection):
	# both requests wait in the stopped server, and the first to run takes the lock
	wait_until 30 grep -q '; retrying for up to' "$RLOCK_ERR"
	wait_until 30 past $((expiry + 100))
	kill -CONT "$REDIS_PID"
	# else it waits for its own lock, which nobody releases, until the ttl (60 s) ends
	wait_until 15 test -e ran || fail "not taken as its own: $(cat "$RLOCK_ERR")"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{w}'
}
