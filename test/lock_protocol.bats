#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# The lock protocol as seen in Redis (SPEC §1, §7): key layout, token, TTL, fence,
# owner metadata, release (compare-and-delete), release notification, conflicts.

load helpers

@test "while held: key holds a 32-hex token with a TTL; env matches" {
	rlock_bg -t 5s -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	local token
	token=$(rcli GET 'rlock:{p}')
	assert_regex "$token" '^[0-9a-fA-F]{32}$'
	assert_equal "$(env_of a RLOCK_TOKEN)" "$token"
	assert_equal "$(env_of a RLOCK_KEY)" 'rlock:{p}'
	assert_equal "$(env_of a RLOCK_TTL_MS)" 5000
	assert_equal "$(env_of a RLOCK_FENCE)" "$(rcli GET 'rlock:{p}:fence')"
	local pttl
	pttl=$(rcli PTTL 'rlock:{p}')
	((pttl > 0 && pttl <= 5000)) || fail "lock PTTL $pttl not in (0, 5000]"
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
}

@test "owner hash: host, pid, user, cmd, start, ttl, with the lock's expiry" {
	rlock_bg -t 5s -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	local field v
	for field in host pid user cmd start ttl; do
		v=$(rcli HGET 'rlock:{p}:owner' "$field")
		[[ -n $v ]] || fail "owner hash has no '$field'"
	done
	assert_equal "$(rcli HGET 'rlock:{p}:owner' host)" "$(hostname)"
	v=$(rcli HGET 'rlock:{p}:owner' pid)
	[[ $v == "$RLOCK_PID" || $v == "$(cat a.pid)" ]] ||
		fail "owner pid $v is neither rlock ($RLOCK_PID) nor the command ($(cat a.pid))"
	assert_equal "$(rcli HGET 'rlock:{p}:owner' user)" "$(id -un)"
	assert_regex "$(rcli HGET 'rlock:{p}:owner' cmd)" 'hold'
	v=$(rcli PTTL 'rlock:{p}:owner')
	((v > 0 && v <= 5000)) || fail "owner PTTL $v not in (0, 5000]"
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
}

@test "owner user: \$USER, else \$LOGNAME (cron's), as the environment says it (no NSS look-up), else the uid's account name" {
	local user
	for user in someone '' 'two words'; do
		env -u LOGNAME USER="$user" "$RLOCK" -k u -- \
			sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
		if [[ $user == someone ]]; then
			assert_equal "$(cat u.out)" someone
		else
			assert_equal "$(cat u.out)" "$(id -un)"
		fi
	done
	# cron(8) sets LOGNAME, not USER; USER first when both are set
	env -u USER LOGNAME=cronjob "$RLOCK" -k u -- sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
	assert_equal "$(cat u.out)" cronjob
	USER=someone LOGNAME=cronjob rlock -k u -- sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
	assert_equal "$(cat u.out)" someone
	# not a plain name: the next one, else the account's
	env -u USER LOGNAME='two words' "$RLOCK" -k u -- sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
	assert_equal "$(cat u.out)" "$(id -un)"
	USER='two words' LOGNAME=cronjob rlock -k u -- sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
	assert_equal "$(cat u.out)" cronjob
	env -u USER -u LOGNAME "$RLOCK" -k u -- sh -c "redis-cli -p $REDIS_PORT HGET 'rlock:{u}:owner' user >u.out"
	assert_equal "$(cat u.out)" "$(id -un)"
}

@test "after release: lock and owner keys gone, fence kept without expiry" {
	run -0 rlock -k p -- true
	key_absent 'rlock:{p}'
	key_absent 'rlock:{p}:owner'
	assert_equal "$(rcli GET 'rlock:{p}:fence')" 1
	assert_equal "$(rcli TTL 'rlock:{p}:fence')" -1
}

@test "fence strictly increases across runs; tokens differ" {
	local f prev=0 t tokens=()
	for _ in 1 2 3 4; do
		run -0 rlock -k p -- sh -c 'echo "$RLOCK_FENCE $RLOCK_TOKEN"'
		f=${output%% *}
		t=${output#* }
		[[ $f =~ ^[0-9]+$ ]] || fail "RLOCK_FENCE '$f' is not a number"
		((f > prev)) || fail "fence $f not greater than previous $prev"
		prev=$f
		tokens+=("$t")
	done
	assert_equal "$(rcli GET 'rlock:{p}:fence')" "$prev"
	assert_equal "$(printf '%s\n' "${tokens[@]}" | sort -u | wc -l)" 4
}

@test "release publishes on rlock:{NAME}:released" {
	redis-cli -p "$REDIS_PORT" SUBSCRIBE 'rlock:{p}:released' >sub.out 2>&1 </dev/null 3>&- 4>&- &
	track_pid $!
	wait_until 30 eval '[[ $(waiters p) == 1 ]]'
	run -0 rlock -k p -- true
	wait_until 30 grep -qx message sub.out
}

@test "--prefix and RLOCK_PREFIX change the key" {
	run -0 rlock --prefix 'app:' -k p -- sh -c 'echo "$RLOCK_KEY"; redis-cli -p "$REDIS_PORT" EXISTS "$RLOCK_KEY"'
	assert_output $'app:{p}\n1'
	assert_equal "$(rcli GET 'app:{p}:fence')" 1
	RLOCK_PREFIX='env:' run -0 rlock -k p -- sh -c 'echo "$RLOCK_KEY"'
	assert_output 'env:{p}'
	key_absent 'rlock:{p}:fence'
}

@test "the lease is renewed: key keeps our token well past the TTL" {
	# 3 s: renewals every second; watched until four renewals were seen (more than a
	# lease). Loss would be decided 2.4 s after the last confirmed renewal: slack for
	# a slow (valgrind) pass, where a 1 s lease was too short.
	rlock_bg -t 3s -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	local token i
	token=$(env_of a RLOCK_TOKEN)
	renewed_reset
	for ((i = 0; i < 1500; i++)); do
		assert_equal "$(rcli GET 'rlock:{p}')" "$token"
		renewed 4 'rlock:{p}' rcli && break
		sleep 0.02
	done
	((_renew_ups >= 4)) || fail "only $_renew_ups renewals seen"
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{p}'
}

@test "release never deletes a foreign token (--on-lost ignore)" {
	run -0 rlock --on-lost ignore -k p -- \
		sh -c 'redis-cli -p "$REDIS_PORT" SET "$RLOCK_KEY" foreign-token >/dev/null'
	assert_equal "$(rcli GET 'rlock:{p}')" foreign-token
}

@test "renewal never extends a foreign token (--on-lost ignore)" {
	# The command replaces the token with a long-lived foreign one and outlives several
	# renewal periods (ttl/3 = 400 ms). A renewal that ignored the token would cut the
	# foreign key's TTL down to 1.2 s.
	run -0 --separate-stderr rlock --on-lost ignore -t 1200ms -k p -- \
		sh -c 'redis-cli -p "$REDIS_PORT" SET "$RLOCK_KEY" foreign-token PX 60000 >/dev/null; sleep 1.5'
	assert_equal "$(rcli GET 'rlock:{p}')" foreign-token
	local pttl
	pttl=$(rcli PTTL 'rlock:{p}')
	((pttl > 50000)) || fail "foreign key's PTTL changed to $pttl"
	[[ -n $stderr ]] || fail "--on-lost ignore should still warn on stderr"
}

@test "-n on a held lock: 75 at once, command not run" {
	rlock_bg -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	local t0 t1
	t0=$(now_ms)
	run -75 rlock -n -k p -- touch ran
	t1=$(now_ms)
	[[ ! -e ran ]]
	# "at once" = while the holder still holds (a waiting rlock would get the lock
	# after it and exit 0); the figure is printed, not bounded (slow passes)
	proc_alive "$RLOCK_PID" || fail "-n returned only after the holder ended"
	echo "# -n on a held lock: 75 after $((t1 - t0)) ms" >&3
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
}

@test "-w DUR on a held lock: 75 after at least DUR" {
	rlock_bg -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	local t0 t1
	t0=$(now_ms)
	run -75 rlock -w 1s -k p -- touch ran
	t1=$(now_ms)
	[[ ! -e ran ]]
	echo "# -w 1s gave up after $((t1 - t0)) ms" >&3
	((t1 - t0 >= 1000)) || fail "-w 1s gave up after only $((t1 - t0)) ms"
	# an rlock that ignored -w would have waited for the holder (and exited 0)
	proc_alive "$RLOCK_PID" || fail "-w 1s returned only after the holder ended"
	t0=$(now_ms)
	run -75 rlock --timeout 0.5 -k p -- touch ran
	t1=$(now_ms)
	((t1 - t0 >= 500)) || fail "--timeout 0.5 gave up after only $((t1 - t0)) ms"
	[[ ! -e ran ]]
	touch a.release
	rlock_wait
}

@test "-w DUR acquires when the holder releases within DUR" {
	rlock_bg -k p -- "$HOLD" a
	local holder=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -w 20s -k p -- "$HOLD" b
	local waiter=$RLOCK_PID
	wait_until 30 eval '[[ $(waiters p) -ge 1 ]]'
	[[ ! -e b.started ]] || fail "waiter ran while the lock was held"
	touch a.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -e b.started
	touch b.release
	rlock_wait "$waiter"
	assert_equal "$RLOCK_STATUS" 0
	(($(cat b.start) >= $(cat a.end))) || fail "waiter started before the holder ended"
}

@test "--status reports the holder" {
	rlock_bg -k p -- "$HOLD" a
	wait_until 30 test -e a.started
	run -75 rlock -k p --status
	[[ -n $output ]] || fail "--status printed nothing for a held lock"
	touch a.release
	rlock_wait
	run -0 rlock -k p --status
}

@test "--min-hold keeps the lock after a short command" {
	rlock_bg --min-hold 3s -k p -- true
	local t0
	t0=$(now_ms)
	wait_until 30 key_exists 'rlock:{p}:fence'
	# within the min-hold window the lock is busy
	run rlock -n -k p -- true
	if (($(now_ms) - t0 < 2500)); then
		assert_equal "$status" 75
	fi
	# and it becomes free afterwards (released or expired), without a manual DEL
	wait_until 30 key_absent 'rlock:{p}'
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	run -0 rlock -n -k p -- true
}

@test "default TTL is 30s" {
	run -0 rlock -k p -- sh -c 'echo "$RLOCK_TTL_MS"'
	assert_output 30000
}

@test "re-entrant: a nested rlock for the same key runs its command directly" {
	run -0 rlock -k p -- "$RLOCK" -n -k p -- sh -c 'echo "inner fence $RLOCK_FENCE"'
	assert_output 'inner fence 1'
	# no second acquisition happened
	assert_equal "$(rcli GET 'rlock:{p}:fence')" 1
	key_absent 'rlock:{p}'
}

@test "a nested rlock for another key acquires it normally" {
	run -0 rlock -k p -- "$RLOCK" -n -k q -- sh -c 'echo "$RLOCK_KEY"'
	assert_output 'rlock:{q}'
	key_absent 'rlock:{p}'
	key_absent 'rlock:{q}'
}

@test "a forged or stale RLOCK_TOKEN does not bypass a held lock" {
	rcli SET 'rlock:{p}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	RLOCK_KEY='rlock:{p}' RLOCK_TOKEN=ffffffffffffffffffffffffffffffff \
		run -75 rlock -n -k p -- touch ran
	[[ ! -e ran ]]
	assert_equal "$(rcli GET 'rlock:{p}')" 0123456789abcdef0123456789abcdef
}

@test "the URL's database is used (redis://host:port/N, unix://path?db=N)" {
	run -0 rlock -u "$REDIS_URL/2" -k p -- sh -c 'redis-cli -p "$REDIS_PORT" -n 2 EXISTS "$RLOCK_KEY"'
	assert_output 1
	assert_equal "$(rcli -n 2 GET 'rlock:{p}:fence')" 1
	key_absent 'rlock:{p}:fence'
	redis_start --unix
	run -0 rlock -u "unix://$REDIS_SOCKET?db=3" -k p -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 1
	assert_equal "$(rcli -n 3 GET 'rlock:{p}:fence')" 1
	redis_stop "$REDIS_PID"
}
