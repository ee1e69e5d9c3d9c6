#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# --preempt / --preemptible (issue 28; GitHub's cancel-in-progress): a --preempt
# request marks the name (PREFIX{NAME}:preempt); a holder that opted in with
# --preemptible learns it from its next renewal, warns its command (--warn), stops it
# as on a lost lease, releases, and exits 81 with a line naming who asked; the
# requester then acquires. A holder without --preemptible is never interrupted.
# A shared log shows the order: the requester's command never overlaps the holder's.

load helpers

setup() {
	common_setup
	: >log
	# the holder's command: traps the warning and SIGTERM, logs its start and its end
	cat >job <<'EOF'
#!/bin/sh
trap 'echo "h warn" >>log' USR1
trap 'echo "h trapped" >>log; echo "h end" >>log; exit 3' TERM
echo "h start" >>log
touch h.started
i=0
while [ ! -e h.release ] && [ $i -lt 3000 ]; do sleep 0.05; i=$((i + 1)); done
echo "h end" >>log
EOF
	chmod +x job
}

@test "--preempt against a --preemptible holder: warned, its SIGTERM trap runs, it releases and exits 81; the requester runs after it" {
	rlock_bg -k p -t 3s --preemptible --warn USR1 --label nightly -- ./job
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 3s --preempt -w 60s --label hotfix -c 'echo "r start" >>log'
	local r_pid=$RLOCK_PID
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 81
	grep -q "lock 'p': preempted by .* pid [0-9]* \[hotfix\]" "$h_err" || fail "$(cat "$h_err")"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat log)" "h start
h warn
h trapped
h end
r start"
	assert_equal "$(rcli EXISTS 'rlock:{p}:preempt')" 0
	assert_equal "$(rcli GET 'rlock:{p}:fence')" 2
}

@test "--preempt against a holder without --preemptible interrupts nothing: it waits for the release" {
	rlock_bg -k p -t 3s --label nightly -- ./job
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -vv -k p -t 3s --preempt -w 60s -c 'echo "r start" >>log'
	local r_pid=$RLOCK_PID r_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$r_err"
	# three renewals of the holder (ttl/3 each) pass, and it is still running
	local fence
	fence=$(rcli GET 'rlock:{p}:fence')
	sleep 3
	proc_alive "$h_pid"
	assert_equal "$(cat log)" "h start"
	assert_equal "$(rcli EXISTS 'rlock:{p}:preempt')" 0
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat log)" "h start
h end
r start"
	assert_equal "$(rcli GET 'rlock:{p}:fence')" $((fence + 1))
}

@test "--preempt, --preemptible: usage errors (64) with one line" {
	run -64 --separate-stderr rlock -k p --preemptible -s -- true
	run -64 --separate-stderr rlock -k p --preempt --fair -- true
	run -64 --separate-stderr rlock -k p --preemptible --acquire
	run -64 --separate-stderr rlock -k p --preempt -n -- true
	run -64 --separate-stderr rlock -k p --preempt --status
	[[ $(grep -c . <<<"$stderr") == 1 ]]
}

@test "--preempt that gives up (-w) withdraws its request: the holder is not stopped later" {
	rlock_bg -k p -t 30s --preemptible -- ./job
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	run -75 --separate-stderr rlock -k p --preempt -w 300ms -- true
	assert_equal "$(rcli EXISTS 'rlock:{p}:preempt')" 0
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat log)" "h start
h end"
}

# preempt_asked: a --preempt request has marked the lock
preempt_asked() { [[ $(rcli EXISTS 'rlock:{p}:preempt') == 1 ]]; }

@test "--preemptible whose command ends on its own before rlock saw the request: exit 0 and the history says released 0, not preempted" {
	# a long lease: no renewal (the one that reads the request) before the command ends
	rlock_bg -k p -t 60s --preemptible --label nightly -- ./job
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k p -t 3s --preempt -w 60s --label hotfix -c 'echo "r start" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 preempt_asked
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 0' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
}
