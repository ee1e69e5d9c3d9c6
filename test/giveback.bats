#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154,SC2030,SC2031  # bats sets $stderr (run --separate-stderr); each @test is a subshell of its own
# A grant given back: its reply came later than the lease floor allows (a server frozen
# through the request, or a link that delays replies), so the run does not use it and
# releases it as an attempt. The attempt is no run: the next attempt of the same token
# starts a run of its own (a loss of it is still 79), and the history keeps no record of
# the grant (acquired, or an expired written for it meanwhile). Split from wire.bats
# (one concern per file: ctest runs them side by side).

bats_require_minimum_version 1.5.0

load helpers

setup_file() { common_setup_file; } # TCP: the proxy forwards to its port

# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }

# A grant whose reply came too late is given back (a release: with the history short or
# off, it leaves its mark rlock:{NAME}:rel:TOKEN for what is left of that lease), and the
# waiter's next attempt takes the lock again under the same token: a new run. The mark
# is the first run's answer, not the second's: a second run whose lock is broken ends
# lost (79) at its release, never "released" (0) by the first run's mark.
@test "a grant given back (its reply came too late) and taken again by the same token: a loss of the second run is still 79" {
	local h mode
	for h in 0 50; do
		for mode in "" -s; do
			late_taken_again "$h" ${mode:+"$mode"}
		done
	done
}

# late_taken_again HISTORY [-s]: one round of the test above.
late_taken_again() {
	local h=$1
	shift
	printf 'history = %s\n' "$h" >conf
	export RLOCK_CONFIG=$PWD/conf
	rm -f late.*
	run -0 rlock "$@" -k warm -- true # the scripts are cached: the first request runs as sent
	# the server frozen before the request comes: it runs it when it thaws, later
	# than the lease floor (4/5 of 5 s) after it was sent, and answers
	kill -STOP "$REDIS_PID"
	rlock_bg -vv -t 5s --io-timeout 20s -w 60s "$@" -k late -- "$HOLD" late
	local w=$RLOCK_PID werr=$RLOCK_ERR t0
	t0=$(now_ms)
	wait_until 30 past $((t0 + 6500)) # margin for a slow start; well inside --io-timeout
	kill -CONT "$REDIS_PID"
	wait_until 30 test -e late.started || fail "never ran: $(cat "$werr")"
	track_pidfile late.pid
	grep -q 'too late' "$werr" || fail "no late grant given back: $(cat "$werr")"
	run -0 rlock -k late --break
	touch late.release
	rlock_wait "$w" 30
	((RLOCK_STATUS == 79)) || fail "history = $h $*: exit $RLOCK_STATUS for a run whose lock was broken: $(cat "$werr")"
}

@test "--history: a grant given back unused (its reply came too late) is no run: one acquired record for the run, not a pair before it" {
	local mode k
	for mode in "" -s; do
		k=lategb$mode
		run -0 rlock $mode -k warm -- true # the scripts are cached: the request runs as sent
		# the server frozen before the request comes: it runs it when it thaws, later
		# than the lease floor (4/5 of 1 s) after it was sent: the grant is given back
		# unused, and the next attempt (the same token) takes the lock for the run
		kill -STOP "$REDIS_PID"
		rlock_bg -vv -t 1s --io-timeout 20s -w 60s $mode -k "$k" -- true
		local w=$RLOCK_PID werr=$RLOCK_ERR t0
		t0=$(now_ms)
		wait_until 30 past $((t0 + 1500))
		kill -CONT "$REDIS_PID"
		rlock_wait "$w" 30
		((RLOCK_STATUS == 0)) || fail "$mode: exit $RLOCK_STATUS: $(cat "$werr")"
		grep -q 'too late' "$werr" || fail "$mode: no late grant given back: $(cat "$werr")"
		run -0 rlock --history --json -k "$k"
		assert_equal "$mode: $(jq -r '[.entries[].event] | join(" ")' <<<"$output")" "$mode: released acquired"
	done
}

# has_label NAME LABEL: NAME's history has an entry labelled LABEL.
has_label() {
	rlock -k "$1" --history --json -n 1000 | jq -e --arg l "$2" '.entries | any(.label == $l)' >/dev/null
}

# late_grant NAME MODE...: replies 6 s late from now on (past the lease floor, 4/5 of
# 2 s); a request labelled late, -n, in MODE, whose acquire the server has run: its
# reply is on its way. Sets w, werr (declared by the caller).
late_grant() {
	local k=$1
	shift
	run -0 rlock "$@" -k "$k" -- true # the scripts are cached: the request runs as sent
	delay_proxy_start 6000
	rlock_bg -t 2s --io-timeout 20s -n "$@" -u "$PROXY_URL" --label late -k "$k" -- touch ran
	w=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 has_label "$k" late
}

# late_grant_left_nothing NAME WHILE: the late request was still waiting for its reply
# after WHILE; it ended 69 without running, and its grant, given back unused, left no
# record (the history is read into output). Stops the proxy.
late_grant_left_nothing() {
	kill -0 "$w" 2>/dev/null || fail "$mode: the late request ended before $2: $(cat "$werr")"
	rlock_wait "$w" 30
	assert_equal "$mode: $RLOCK_STATUS" "$mode: 69"
	[[ ! -e ran ]]
	run -0 rlock -k "$1" --history --json -n 1000
	assert_equal "$mode: $(jq -r '[.entries[] | select(.label == "late") | "\(.event)/\(.recorded)"] | join(" ")' <<<"$output")" "$mode: "
	kill "$PROXY_PID"
}

@test "--history: a grant given back unused after its lease ran out (its reply came later than the lease) is no run, also after a dozen records were written meanwhile (-s, --limit)" {
	local mode k w werr i
	for mode in -x -s "-l 20"; do
		k=gbbusy${mode// /}
		# shellcheck disable=SC2086 # the mode: one or two words
		late_grant "$k" $mode
		# while its reply is on its way, six runs (twelve records) come after its
		# acquired record (exclusive: the others would wait for its lease, then find it
		# expired)
		[[ $mode == -x ]] || for i in 1 2 3 4 5 6; do
			# shellcheck disable=SC2086
			run -0 rlock $mode --label "other$i" -k "$k" -- true
		done
		late_grant_left_nothing "$k" "the six runs"
	done
}

@test "--history: a grant given back unused that another request found expired first (its reply came later than the lease) is no run (exclusive, -s)" {
	local mode k w werr
	for mode in -x -s; do
		k=gbnext$mode
		late_grant "$k" $mode
		# an exclusive request takes the name once the unused grant's lease is over (and
		# records it expired), before the grant's reply comes and it is given back
		run -0 rlock -w 30s --label next -k "$k" -- true
		late_grant_left_nothing "$k" "the next run"
		assert_equal "$mode: $(jq -r '[.entries[] | select(.label == "next") | .event] | join(" ")' <<<"$output")" "$mode: released acquired"
	done
}
