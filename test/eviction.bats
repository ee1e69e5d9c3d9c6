#!/usr/bin/env bats
# The eviction-policy warning (a server whose maxmemory-policy can evict the lock): at
# most once a day per server, remembered in Redis (PREFIXeviction-warned, EX 86400), or
# never once the operator acknowledged it in the config file (eviction-warning = off).
# The policy is looked at right after the first renewal (ttl/3), so that a short command
# costs one connection and no INFO; -v looks at once (the tests below use it).

# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	redis_start --maxmemory-policy allkeys-lru
}

# warned: the last run's stderr has the warning.
warned() { [[ $stderr =~ warning:.*maxmemory-policy\ allkeys-lru.*evict ]]; }

@test "warned on the first run only; the marker expires within a day" {
	run -0 --separate-stderr rlock -v -k e -- true
	warned || fail "not warned: $stderr"
	assert_equal "$(grep -c maxmemory-policy <<<"$stderr")" 1
	local ttl
	ttl=$(rcli TTL rlock:eviction-warned)
	((ttl > 0 && ttl <= 86400)) || fail "marker TTL $ttl"
	run -0 --separate-stderr rlock -v -k e -- true
	! warned || fail "warned twice: $stderr"
	# the marker is per prefix (its key lives under it) and per server
	run -0 --separate-stderr rlock -v --prefix other: -k e -- true
	warned || fail "not warned under another prefix: $stderr"
	# once the marker is gone (a day later), warned again
	rcli DEL rlock:eviction-warned >/dev/null
	run -0 --separate-stderr rlock -v -k e -- true
	warned || fail "not warned again: $stderr"
}

@test "acknowledged in the config file: never warned, nothing written" {
	printf 'eviction-warning = off\n' >conf
	run -0 --separate-stderr rlock -v --config conf -k e -- true
	! warned || fail "warned: $stderr"
	key_absent rlock:eviction-warned
}

@test "eviction-warning takes on or off" {
	printf 'eviction-warning = on\n' >conf
	run -0 --separate-stderr rlock -v --config conf -k e -- true
	warned || fail "not warned: $stderr"
	printf 'eviction-warning = maybe\n' >conf
	run -64 --separate-stderr rlock --config conf -k e -- true
	assert_one_line_error
	assert_regex "$stderr" "conf:1: .*eviction-warning"
}

@test "without -v: a short command costs one connection and no INFO; warned after the first renewal" {
	rcli CONFIG RESETSTAT >/dev/null
	run -0 --separate-stderr rlock -k e -- true
	assert_equal "$stderr" ""
	# the INFO below is counted after it runs; its connection is the second one
	local stats
	stats=$(rcli INFO all | tr -d '\r')
	[[ $stats != *cmdstat_info:* ]] || fail "rlock sent INFO: $(grep cmdstat_info <<<"$stats")"
	assert_equal "$(sed -n 's/^total_connections_received://p' <<<"$stats")" 2
	key_absent rlock:eviction-warned
	# a command that outlives the first renewal (ttl/3): looked at then
	run -0 --separate-stderr rlock -t 1s -k e -- sh -c '
		i=0
		until [ "$(redis-cli -p "$0" EXISTS rlock:eviction-warned)" = 1 ] || [ $i -ge 600 ]; do
			sleep 0.05
			i=$((i + 1))
		done' "$REDIS_PORT"
	warned || fail "not warned after the first renewal: $stderr"
	assert_equal "$(grep -c maxmemory-policy <<<"$stderr")" 1
}

@test "several -k on one server: one warning, one INFO" {
	rcli DEL rlock:eviction-warned >/dev/null
	rcli CONFIG RESETSTAT >/dev/null
	run -0 --separate-stderr rlock -v -k e1 -k e2 -k e3 -- true
	warned || fail "not warned: $stderr"
	assert_equal "$(grep -c maxmemory-policy <<<"$stderr")" 1
	[[ $(rcli INFO commandstats | tr -d '\r' | grep ^cmdstat_info:) == cmdstat_info:calls=1,* ]] ||
		fail "$(rcli INFO commandstats | grep cmdstat_info)"
}
