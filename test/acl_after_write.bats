#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for wait_until's eval; bats sets $stderr
# An ACL user refused a command that one of rlock's scripts runs after its writes (Redis
# keeps what a script wrote before an error). A user without channel rights (Redis 7's
# default for a new user, acl-pubsub-default resetchannels) is refused PUBLISH: a wake-up
# is best effort (waiters poll on their own timer), so a script must never answer with an
# error after it has written: a grant reported as a failure is held by nobody until its
# TTL, a --supersede request that replaced the older one and then failed leaves neither
# to run. A user refused what the grant itself needs is refused before the grant.

load helpers

setup_file() {
	common_setup_file
	# the documented ACL line (docs/production.md) without its channels ('&rlock:*')
	local acl
	acl=$(sed -n 's/^ *ACL SETUSER locker reset on >PASSWORD //p' \
		"${RLOCK_SOURCE_DIR:-$BATS_TEST_DIRNAME/..}/docs/production.md")
	[[ $acl == '~rlock:* &rlock:* +'* ]] || return 1
	# shellcheck disable=SC2086  # a list of ACL rules
	rcli ACL SETUSER nochan reset on '>Nch-s3cret-P5' resetchannels ${acl/'&rlock:* '/} >/dev/null
	# the documented line before --lock-delay: no +zremrangebyscore
	# shellcheck disable=SC2086
	rcli ACL SETUSER nodelay reset on '>Nch-s3cret-P5' ${acl/'+zremrangebyscore '/} >/dev/null
	# no +hset: a shared grant (ZADD) comes before the holder's record (HSET)
	# shellcheck disable=SC2086
	rcli ACL SETUSER nohset reset on '>Nch-s3cret-P5' ${acl/'+hset '/} >/dev/null
	export URL="redis://127.0.0.1:$REDIS_PORT"
}

setup() {
	common_setup
	export RLOCK_PASSWORD='Nch-s3cret-P5'
	U=(-u "$URL" --user nochan)
	# the user really cannot publish (else these tests would prove nothing)
	run rcli ACL DRYRUN nochan PUBLISH 'rlock:{x}:released' m
	assert_output --partial 'no permissions'
}

# no_server_error FILE...: none of these rlocks was answered with a server error
no_server_error() {
	local f
	for f in "$@"; do
		if grep -q 'server error' "$f"; then
			fail "$(cat "$f")"
		fi
	done
}

@test "no channel rights: a shared grant that passes the --fair queue's wake-up on is granted, not an error" {
	rlock_bg "${U[@]}" --fair -k q -- "$HOLD" x
	local x=$RLOCK_PID xerr=$RLOCK_ERR
	wait_until 30 test -e x.started
	rlock_bg "${U[@]}" --fair -s -w 60 -k q -- "$HOLD" s
	local s=$RLOCK_PID serr=$RLOCK_ERR
	wait_until 30 eval '(($(rcli ZCARD "rlock:{q}:queue") == 1))'
	# behind it, an exclusive request: the shared grant wakes it (PUBLISH, refused)
	rlock_bg "${U[@]}" --fair -w 60 -k q -- "$HOLD" y
	local y=$RLOCK_PID yerr=$RLOCK_ERR
	wait_until 30 eval '(($(rcli ZCARD "rlock:{q}:queue") == 2))'
	touch x.release
	rlock_wait "$x"
	assert_equal "$RLOCK_STATUS" 0
	# the shared request runs: its grant was answered as one (its own wait is long)
	wait_until 30 test -e s.started
	[[ ! -e y.started ]] || fail "the exclusive request ran beside the shared one"
	touch s.release
	rlock_wait "$s"
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -e y.started
	touch y.release
	rlock_wait "$y"
	assert_equal "$RLOCK_STATUS" 0
	no_server_error "$xerr" "$serr" "$yerr"
}

@test "no channel rights: a newer --supersede request replaces the waiting one and runs" {
	rlock_bg "${U[@]}" -k su -- "$HOLD" h
	local holder=$RLOCK_PID herr=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg "${U[@]}" --supersede --label old -w 60 -k su -- true
	local old=$RLOCK_PID
	wait_until 30 eval '[[ $(rcli HGET "rlock:{su}:supersede" label) == old ]]'
	rlock_bg "${U[@]}" --supersede --label new -w 60 -k su -- "$HOLD" new
	local new=$RLOCK_PID nerr=$RLOCK_ERR
	rlock_wait "$old"
	assert_equal "$RLOCK_STATUS" 80
	# the newer one took the place (it waits), it did not fail
	wait_until 30 eval '[[ $(rcli HGET "rlock:{su}:supersede" label) == new ]]'
	proc_alive "$new" || fail "the newer request is gone: $(cat "$nerr")"
	touch h.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -e new.started
	touch new.release
	rlock_wait "$new"
	assert_equal "$RLOCK_STATUS" 0
	no_server_error "$herr" "$nerr"
}

@test "no channel rights: releases (exclusive, shared, --fair), a waiter that gives up and --break answer without an error" {
	# -vv: an error reply that rlock retried (a release sent again) is told there
	local errs=() m
	# a release with a plain waiter, a shared release with a queued --fair waiter, a
	# --fair release with the queue's head: each publishes after deleting
	for m in x s f; do
		local mode=() wmode=()
		[[ $m == s ]] && mode=(-s) wmode=(--fair)
		[[ $m == f ]] && mode=(--fair) wmode=(--fair)
		rlock_bg -vv "${U[@]}" "${mode[@]}" -k "r$m" -- "$HOLD" "r$m"
		local h=$RLOCK_PID
		errs+=("$RLOCK_ERR")
		wait_until 30 test -e "r$m.started"
		rlock_bg -vv "${U[@]}" "${wmode[@]}" -w 60 -k "r$m" -- true
		local w=$RLOCK_PID
		errs+=("$RLOCK_ERR")
		if [[ $m == x ]]; then
			wait_until 30 eval '(($(rcli ZCARD "rlock:{rx}:waiters") == 1))'
		else
			wait_until 30 eval '(($(rcli ZCARD "rlock:{r'$m'}:queue") == 1))'
		fi
		touch "r$m.release"
		rlock_wait "$h"
		assert_equal "$RLOCK_STATUS" 0
		rlock_wait "$w"
		assert_equal "$RLOCK_STATUS" 0
	done
	# a --fair head that gives up wakes the next one (leave.lua)
	rlock_bg -vv "${U[@]}" --fair -k lv -- "$HOLD" lv
	local h=$RLOCK_PID
	errs+=("$RLOCK_ERR")
	wait_until 30 test -e lv.started
	rlock_bg -vv "${U[@]}" --fair -w 2 -k lv -- true
	local w1=$RLOCK_PID
	errs+=("$RLOCK_ERR")
	wait_until 30 eval '(($(rcli ZCARD "rlock:{lv}:queue") == 1))'
	rlock_bg -vv "${U[@]}" --fair -w 60 -k lv -- true
	local w2=$RLOCK_PID
	errs+=("$RLOCK_ERR")
	rlock_wait "$w1"
	assert_equal "$RLOCK_STATUS" 75
	touch lv.release
	rlock_wait "$h"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$w2"
	assert_equal "$RLOCK_STATUS" 0
	# --break with a waiter: the operator is told it broke the lock
	rlock_bg -vv "${U[@]}" -k br -- "$HOLD" br
	h=$RLOCK_PID
	wait_until 30 test -e br.started
	rlock_bg -vv "${U[@]}" -w 60 -k br -- true
	local w=$RLOCK_PID
	errs+=("$RLOCK_ERR")
	wait_until 30 eval '(($(rcli ZCARD "rlock:{br}:waiters") == 1))'
	run -0 --separate-stderr rlock -vv "${U[@]}" -k br --break
	refute_regex "$stderr" 'server error'
	rlock_wait "$w"
	assert_equal "$RLOCK_STATUS" 0
	touch br.release
	rlock_wait "$h"
	no_server_error "${errs[@]}"
}

@test "a user refused --lock-delay's command is refused before the grant: no lock is left that nobody holds" {
	local u=(-u "$URL" --user nodelay) m
	for m in x s f; do
		local mode=()
		[[ $m == s ]] && mode=(-s)
		[[ $m == f ]] && mode=(--fair)
		run -69 --separate-stderr rlock "${u[@]}" "${mode[@]}" --lock-delay 1s -k "d$m" -- echo ran
		refute_output --partial ran
		assert_regex "$stderr" 'may not run a command'
		# nothing granted: the name is free at once, for anyone
		key_absent "rlock:{d$m}"
		assert_equal "$(rcli ZCARD "rlock:{d$m}:holders")" 0
		run -0 rlock "${u[@]}" "${mode[@]}" -n -k "d$m" -- echo ran
		assert_output ran
	done
}

@test "an acquire refused inside its script after its grant (no +hset: -s, -l) gives the grant back: nothing held by nobody" {
	local m
	for m in -s '-l 2'; do
		# shellcheck disable=SC2086  # -l 2: two words
		run -69 --separate-stderr rlock -u "$URL" --user nohset $m -k h -- echo ran
		refute_output --partial ran
		assert_regex "$stderr" 'may not run a command'
		assert_equal "$(rcli ZCARD 'rlock:{h}:holders')" 0
		# the default user takes it exclusively at once (-n: no waiting out a TTL)
		run -0 env -u RLOCK_PASSWORD "$RLOCK" -u "$URL" -n -k h -- echo ran
		assert_output ran
	done
}

# sub_refused: SUBSCRIBE and SSUBSCRIBE calls the ACL refused so far (INFO commandstats)
sub_refused() {
	rcli INFO commandstats | sed -n 's/^cmdstat_s\{0,1\}subscribe:.*rejected_calls=\([0-9]*\).*/\1/p' |
		awk '{ n += $1 } END { print n + 0 }'
}

@test "no channel rights: a waiter refused SUBSCRIBE says so once (-v), asks no more (no connection per nap), polls, and gets the lock" {
	# It asked again on a new connection at every nap, silently (-vv only): 6 refusals
	# and 10 connections in a 4 s wait.
	local m before
	for m in -s --fair; do
		before=$(sub_refused)
		rcli SET 'rlock:{sub}' 0123456789abcdef0123456789abcdef PX 3000 >/dev/null
		run -0 --separate-stderr rlock -v "${U[@]}" "$m" -w 20 -k sub -- echo ran
		assert_output ran
		assert_equal "$(grep -c 'release notifications refused (.*NOPERM.*): polling instead' <<<"$stderr")" 1
		assert_equal "$(($(sub_refused) - before))" 1
		# without -v: not a word of it
		rcli SET 'rlock:{sub}' 0123456789abcdef0123456789abcdef PX 1000 >/dev/null
		run -0 --separate-stderr rlock "${U[@]}" "$m" -w 20 -k sub -- echo ran
		assert_equal "$stderr" ""
	done
}
