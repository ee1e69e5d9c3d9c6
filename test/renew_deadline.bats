#!/usr/bin/env bats
# The renewal thread decides loss by its deadline even when reconnecting hangs: a
# connect to a black-holed port (SYNs dropped) with a 20 s --connect-timeout must not
# delay the loss decision past the lease.

# shellcheck disable=SC2154,SC2030,SC2031  # bats sets $stderr; each @test is its own subshell
load helpers

@test "reconnect that hangs: loss still decided before the lease ends" {
	local main_pid=$REDIS_PID main_port=$REDIS_PORT main_url=$REDIS_URL
	redis_start
	local port=$REDIS_PORT mine=$REDIS_PID
	rlock_bg -u "redis://127.0.0.1:$port" -t 2s --connect-timeout 20s --kill-after 1s \
		-k bh -- sh -c 'touch started; sleep 60'
	wait_until 10 test -e started
	redis_stop "$mine"
	perl "$BATS_TEST_DIRNAME/blackhole.pl" "$port" bh.ready 3>&- 4>&- &
	track_pid $!
	wait_until 10 test -e bh.ready
	local t0=$SECONDS
	rlock_wait "$RLOCK_PID" 15
	REDIS_PID=$main_pid REDIS_PORT=$main_port REDIS_URL=$main_url
	assert_equal "$RLOCK_STATUS" 79
	# 2 s lease: lost by 1.6 s after the last renewal, SIGKILL 1 s later at worst.
	((SECONDS - t0 <= 6)) || fail "loss took $((SECONDS - t0)) s: the reconnect was not bounded"
}

@test "renewal thread cannot start: the command is treated as having lost the lock" {
	# A shim whose pthread_create always fails (as under a thread limit).
	cat >shim.c <<'C'
#include <errno.h>
#include <pthread.h>
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
	(void)t; (void)a; (void)f; (void)arg;
	return EAGAIN;
}
C
	"${CC:-cc}" -shared -fPIC -o shim.so shim.c
	# (Under ASan the shim precedes the sanitizer runtime: tell ASan that is fine.)
	run -79 --separate-stderr env LD_PRELOAD="$PWD/shim.so" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$RLOCK" -u "$REDIS_URL" \
		--kill-after 1s -k nothread -- sh -c 'touch started; sleep 30; touch survived'
	[[ ! -e survived ]]
	assert_regex "$stderr" 'cannot start the renewal thread'
	assert_regex "$stderr" 'lock lost: the lease cannot be renewed'
	key_absent 'rlock:{nothread}'
}
