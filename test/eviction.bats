#!/usr/bin/env bats
# The eviction-policy warning (a server whose maxmemory-policy can evict the lock): at
# most once a day per server, remembered in Redis (PREFIXeviction-warned, EX 86400), or
# never once the operator acknowledged it in the config file (eviction-warning = off).

# shellcheck disable=SC2154  # bats sets $stderr
load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	redis_start --maxmemory-policy allkeys-lru
}

@test "warned on the first run only; the marker expires within a day" {
	run -0 --separate-stderr rlock -k e -- true
	assert_regex "$stderr" 'warning:.*maxmemory-policy allkeys-lru.*evict'
	assert_equal "$(grep -c maxmemory-policy <<<"$stderr")" 1
	local ttl
	ttl=$(rcli TTL rlock:eviction-warned)
	((ttl > 0 && ttl <= 86400)) || fail "marker TTL $ttl"
	run -0 --separate-stderr rlock -k e -- true
	assert_equal "$stderr" ""
	# the marker is per prefix (its key lives under it) and per server
	run -0 --separate-stderr rlock --prefix other: -k e -- true
	assert_regex "$stderr" 'maxmemory-policy allkeys-lru'
	# once the marker is gone (a day later), warned again
	rcli DEL rlock:eviction-warned >/dev/null
	run -0 --separate-stderr rlock -k e -- true
	assert_regex "$stderr" 'maxmemory-policy allkeys-lru'
}

@test "acknowledged in the config file: never warned, nothing written" {
	printf 'eviction-warning = off\n' >conf
	run -0 --separate-stderr rlock --config conf -k e -- true
	assert_equal "$stderr" ""
	key_absent rlock:eviction-warned
}

@test "eviction-warning takes on or off" {
	printf 'eviction-warning = on\n' >conf
	run -0 --separate-stderr rlock --config conf -k e -- true
	assert_regex "$stderr" 'maxmemory-policy'
	printf 'eviction-warning = maybe\n' >conf
	run -64 --separate-stderr rlock --config conf -k e -- true
	assert_one_line_error
	assert_regex "$stderr" "conf:1: .*eviction-warning"
}
