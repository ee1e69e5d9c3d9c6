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
	# A 5 s lease: loss decided 4 s after the last confirmed renewal, 1 s of margin
	# (2 s left 400 ms: a loaded machine's scheduling delays ate that).
	rlock_bg -u "redis://127.0.0.1:$port" -t 5s --connect-timeout 20s --kill-after 1s \
		-k bh -- sh -c 'echo $$ >c.pid; touch started; exec sleep 60'
	wait_until 30 test -e started
	track_pidfile c.pid
	redis_stop "$mine"
	# no renewal can reach the server after this: the lease ends by t_gone + 5 s
	local t_gone t_dead
	t_gone=$(now_ms)
	perl "$BATS_TEST_DIRNAME/blackhole.pl" "$port" bh.ready 3>&- 4>&- &
	track_pid $!
	wait_until 30 test -e bh.ready
	wait_until 30 pidfile_gone c.pid || fail "the command outlived the lease"
	t_dead=$(now_ms)
	rlock_wait "$RLOCK_PID" 30
	REDIS_PID=$main_pid REDIS_PORT=$main_port REDIS_URL=$main_url
	assert_equal "$RLOCK_STATUS" 79
	# The guarantee: the command is dead before the lease can end on the server (loss
	# decided 4 s after the last confirmed renewal; the command dies of SIGTERM).
	# t_dead is when the test saw it dead (polled every 20 ms): an upper bound.
	echo "# reconnect hanging: command dead $((t_dead - t_gone)) ms after the server went (lease 5000 ms)" >&3
	((t_dead - t_gone < 5000)) ||
		fail "command dead $((t_dead - t_gone)) ms after the server went: the lease could have ended"
}

@test "renewal thread cannot start: a short command needs none; a longer one is stopped before the lease ends, 79" {
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
	local asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	# The thread starts when the first renewal is due (ttl/3): a command that ends
	# before needs none, runs, and the lock is given back.
	run -0 --separate-stderr env LD_PRELOAD="$PWD/shim.so" ASAN_OPTIONS="$asan" \
		"$RLOCK" -u "$REDIS_URL" -t 60s -k nothread -- touch started
	[[ -e started ]]
	key_absent 'rlock:{nothread}'
	# One that outlives ttl/3: nothing renews, so the lease rule stops it (loss at
	# 4/5 of the ttl, SIGKILL by 9/10) and rlock says why: never a silent success.
	run -79 --separate-stderr env LD_PRELOAD="$PWD/shim.so" ASAN_OPTIONS="$asan" \
		"$RLOCK" -u "$REDIS_URL" -t 2s -k nothread -- sh -c 'sleep 30; touch finished'
	[[ ! -e finished ]] || fail "the command ran on past its lease"
	assert_regex "$stderr" 'cannot start the renewal thread'
	assert_regex "$stderr" 'lock lost'
}

threads_of() { awk '/^Threads:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

@test "the renewal thread starts when the first renewal is due, not before (a short command runs on one thread)" {
	# ttl 9 s: the first renewal is due 3 s after the acquire, far beyond the first look.
	# shellcheck disable=SC2016 # the $$ is the shell's own
	rlock_bg -t 9s -k lazy -- sh -c 'echo $$ >c.pid; touch started; i=0
		while [ ! -e go ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done'
	wait_until 10 test -e started
	track_pidfile c.pid
	assert_equal "$(threads_of "$RLOCK_PID")" 1
	renewed_reset
	wait_until 20 renewed 1 'rlock:{lazy}' rcli || fail "no renewal once it was due"
	# One more than before; a sanitizer may add its own (TSan's starts with the first
	# pthread_create), so 2 is the least, not the only answer.
	local after
	after=$(threads_of "$RLOCK_PID")
	((after >= 2)) || fail "threads once a renewal was due: '$after'"
	touch go
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{lazy}'
}

@test "the shortest ttl (100ms) holds on a healthy server: renewals confirmed in time never let the watchdog kill the command" {
	# The watchdog holds the group's SIGKILL deadline (9/10 of the ttl after the last
	# confirmed send); the supervisor must pass on each renewal's later deadline in time,
	# not 1/10 of the ttl (10 ms) before the old one ran out.
	# On a loaded machine a 100 ms lease may really be lost (a renewal not confirmed in
	# time, or rlock starved past the watchdog's deadline): the rule working, with the
	# same 79. So one run that holds to its end passes, and 8 lost runs in a row fail:
	# the defect lost every run on a quiet machine (3 of 3) and 9 of 12 at load 7, where
	# the fix lost 3 of 12 (and CI's sanitizer pass 1 of 3). This test catches the
	# defect on a quiet machine only; under load it passes either way.
	local i log=
	for i in 1 2 3 4 5 6 7 8; do
		run --separate-stderr rlock -t 100ms -k short -- sleep 1
		[[ $status == 0 ]] && return 0
		[[ $status == 79 ]] || fail "run $i: exit $status: $stderr"
		log+="run $i: $stderr"$'\n'
	done
	fail "8 runs of 8 counted a lease renewed all along lost: $log"
}
