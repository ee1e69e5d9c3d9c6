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
	# no request left: at most the grant's 'taken' word for the preempted holder
	assert_equal "$(rcli HMGET 'rlock:{p}:preempt' token handover | tr -d '\n')" ""
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
	run -64 --separate-stderr rlock -k p -k q --preempt -- true # one name: its hand-over is one lock's
	[[ $(grep -c . <<<"$stderr") == 1 ]]
	run -64 --separate-stderr rlock -k p -k q --preemptible -- true
	[[ $(grep -c . <<<"$stderr") == 1 ]]
	run -64 --separate-stderr rlock -k p --preempt --status
	[[ $(grep -c . <<<"$stderr") == 1 ]]
	run -64 --separate-stderr rlock -k p --preemptible --min-hold 1s -- true
	[[ $stderr == *'not with --min-hold'* ]] || fail "$stderr"
	# --min-hold 0 is no keep (the default; it lifts a config file's): nothing to refuse
	run -0 --separate-stderr rlock -k p --preemptible --min-hold 5s --min-hold 0 -- true
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
# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }
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

# slow_job: a holder's command whose SIGTERM trap waits (until h.go, 30 s at most), so
# that a test can arrange who waits, and who still lives, before the release.
slow_job() {
	cat >slowjob <<'EOF2'
#!/bin/sh
trap 'echo "h trapped" >>log; i=0; while [ ! -e h.go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done; echo "h end $(date +%s%3N)" >>log; exit 3' TERM
echo "h start" >>log
touch h.started
i=0
while [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
EOF2
	chmod +x slowjob
}

h_trapped() { grep -q '^h trapped' log; }

# log_order: the log's first words, one line each (h start, h trapped, h end, r, f, s)
log_order() { awk '{print $1 ($2 == "start" || $2 == "trapped" || $2 == "end" ? " " $2 : "")}' log; }

@test "--preempt takes the lock before --fair and shared waiters that came later, at once (no stall on the reservation)" {
	slow_job
	# a 6 s lease: the two waiters start (and listen) before the preempted holder's
	# SIGKILL, due before its lease ends (a 3 s one left ~2.7 s: too short on a loaded
	# machine, the holder's command killed before "h end")
	rlock_bg -k p -t 6s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r $(date +%s%3N)" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	# later waiters of other modes: one in the fair queue, one shared
	rlock_bg -k p -t 30s --fair -w 60s -c 'echo "f $(date +%s%3N)" >>log'
	local f_pid=$RLOCK_PID
	wait_until 30 key_exists 'rlock:{p}:queue'
	rlock_bg -vv -k p -t 30s -s -w 60s -c 'echo "s $(date +%s%3N)" >>log'
	local s_pid=$RLOCK_PID s_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$s_err"
	touch h.go
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 81
	for p in "$r_pid" "$f_pid" "$s_pid"; do
		rlock_wait "$p" 30
		assert_equal "$RLOCK_STATUS" 0
	done
	# the request the holder was stopped for ran first, and took the lock at once: not
	# after its reservation (5 s) ran out
	[[ $(log_order | head -4 | tr '\n' ,) == "h start,h trapped,h end,r," ]] || fail "$(cat log)"
	local h_end r_at
	h_end=$(awk '$2 == "end" {print $3}' log)
	r_at=$(awk '$1 == "r" {print $2}' log)
	((r_at - h_end < 2500)) || fail "the --preempt request ran $((r_at - h_end)) ms after the release"
}

@test "--preempt with a --fair waiter already queued behind the holder still stops it, and goes first" {
	slow_job
	rlock_bg -k p -t 3s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --fair -w 60s -c 'echo "f $(date +%s%3N)" >>log'
	local f_pid=$RLOCK_PID
	wait_until 30 key_exists 'rlock:{p}:queue'
	rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r $(date +%s%3N)" >>log'
	local r_pid=$RLOCK_PID
	wait_until 15 h_trapped || fail "the holder was not asked: $(cat log)"
	touch h.go
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 81
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$f_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ $(log_order | tr '\n' ,) == "h start,h trapped,h end,r,f," ]] || fail "$(cat log)"
}

@test "--status and --list show the name kept for a --preempt request (exit 75), then free once its reservation ends" {
	slow_job
	rlock_bg -k p -t 3s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s --label hotfix -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	# the request dies; its mark lives on (5 s), so the release still keeps the name for
	# it, and the holder waits to see whether it takes it
	kill -KILL "$r_pid"
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	run -75 --separate-stderr rlock -k p --status
	[[ $output == *"rlock:{p} is reserved for the --preempt request of "*" pid $r_pid [hotfix] until "* ]] ||
		fail "$output"
	run -75 --separate-stderr rlock -k p --status --json
	jq -e --argjson pid "$r_pid" '.held == false and .reserved.by == "preempt" and
		.reserved.pid == $pid and .reserved.label == "hotfix" and
		(.reserved.token | length) == 32 and .reserved.left_ms > 0 and
		.reserved.until_ms > .reserved.left_ms' <<<"$output" >/dev/null || fail "$output"
	run -0 --separate-stderr rlock --list
	[[ $output == *"reserved for the --preempt request of "*"pid $r_pid"* ]] || fail "$output"
	# its row comes after the header, as every row does (the whole answer is written at once)
	[[ ${lines[0]} == NAME* && ${lines[1]} == p\ * ]] || fail "$output"
	run -0 --separate-stderr rlock --list --json
	jq -e '.locks | length == 1 and .[0].name == "p" and .[0].reserved.by == "preempt"' \
		<<<"$output" >/dev/null || fail "$output"
	run -75 --separate-stderr rlock -k p -n -- true
	# nobody holds it: -n says for whom it is kept, not "held by" the requester
	[[ $stderr == *"lock 'p' is busy: reserved for the --preempt request of "*" pid $r_pid [hotfix] for "*" more" ]] ||
		fail "$stderr"
	# the reservation is a lease: gone with its request
	wait_until 15 key_absent 'rlock:{p}:preempt'
	run -0 --separate-stderr rlock -k p --status
	run -0 --separate-stderr rlock -k p -n -- true
	# the request never took the lock: not 81 (README), the command's own status
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	grep -q "lock 'p': preempted by .*: the command was stopped, but that request never took the lock (it gave up or died); exiting 3" "$h_err" ||
		fail "$(cat "$h_err")"
}

@test "--preemptible stopped for a request killed hard (SIGKILL) within its mark's lease: not 81, the command's own status" {
	rlock_bg -k p -t 3s --preemptible -- ./job
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	# its mark lives 5 s after its last attempt; the holder renews every second
	rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 preempt_asked
	kill -KILL "$r_pid"
	rlock_wait "$h_pid" 30
	grep -q 'h trapped' log || fail "the holder was not stopped: $(cat "$h_err")"
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'exiting 81' "$h_err"
	run ! grep -q 'r ran' log
	run -0 --separate-stderr rlock -k p -n -- true
}

@test "--preemptible stopped for a request that then gave up: the command's own status, one line, and the history says released" {
	slow_job
	rlock_bg -k p -t 6s --preemptible --label nightly -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	# a short mark (the request's ttl, 1 s): gone soon after the request
	rlock_bg -k p -t 1s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -KILL "$r_pid"
	wait_until 15 key_absent 'rlock:{p}:preempt'
	touch h.go
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	grep -q "lock 'p': preempted by .*: the command was stopped, but that request gave up before the lock was released; exiting 3" "$h_err" ||
		fail "$(cat "$h_err")"
	run ! grep -q 'exiting 81' "$h_err"
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 3' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
	# nothing kept for the request that is gone
	run -0 --separate-stderr rlock -k p --status
	run ! grep -q 'r ran' log
}

@test "--preempt that gives up (-w) after the release kept the lock for it, before it took it: the holder exits with the command's status, not 81" {
	slow_job
	rlock_bg -k p -t 3s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR t0
	wait_until 30 test -e h.started
	t0=$(now_ms)
	rlock_bg -k p -t 30s --preempt -w 4s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -STOP "$r_pid" # away until its -w deadline has passed
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	wait_until 30 past $((t0 + 4500))
	kill -CONT "$r_pid"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 75
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'exiting 81' "$h_err"
	run ! grep -q 'r ran' log
}

@test "two --preempt requests: the holder's 81 line names the one its release handed the lock to, as the history does" {
	slow_job
	rlock_bg -k p -t 6s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s --label R1 -c 'echo "R1 ran" >>log'
	local r1=$RLOCK_PID
	wait_until 30 h_trapped
	# a second request asks after the renewal that stopped the command named the first
	rlock_bg -vv -k p -t 30s --preempt -w 60s --label R2 -c 'echo "R2 ran" >>log'
	local r2=$RLOCK_PID r2_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$r2_err"
	local to
	to=$(rcli HGET 'rlock:{p}:preempt' label)
	touch h.go
	rlock_wait "$h_pid" 30
	((RLOCK_STATUS == 81)) || fail "exit $RLOCK_STATUS: $(cat "$h_err")"
	rlock_wait "$r1" 30
	rlock_wait "$r2" 30
	run -0 rlock -k p --history --json
	local by
	by=$(echo "$output" | jq -r '.entries[] | select(.event == "preempted") | .by.label')
	grep -q "lock 'p': preempted by .* pid [0-9]* \[$by\]: the command was stopped, the lock is released to that request; exiting 81" "$h_err" ||
		fail "the history says $by (last asked: $to): $(cat "$h_err")"
	[[ $(head -3 log | tail -1) == "h end"* && $(sed -n 4p log) == "$by ran" ]] || fail "$(cat log)"
}

# reserved_dead: a --preemptible holder (label nightly) stopped for a --preempt request
# (label hotfix) that was then killed hard: its release keeps the free name for that
# request, whose mark lives a few seconds more. Sets h_pid, h_err, r_pid.
reserved_dead() {
	slow_job
	rlock_bg -k p -t 3s --preemptible --label nightly -- ./slowjob
	h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s --label hotfix -c 'echo "r ran" >>log'
	r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -KILL "$r_pid"
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
}

@test "a reservation that ends untaken: the holder's run ends released with the command's status, never preempted" {
	local h_pid h_err r_pid
	reserved_dead
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 3' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
}

@test "--break removes a --preempt reservation (the request may be dead): the name is free at once, and the history records the break" {
	local h_pid h_err r_pid
	reserved_dead
	# a shared request too is told for whom the name is kept, not "held by" it
	run -75 --separate-stderr rlock -k p -n -s -- true
	[[ $stderr == *"lock 'p' is busy: reserved for the --preempt request of "*" pid $r_pid [hotfix] for "*" more" ]] ||
		fail "$stderr"
	run -0 --separate-stderr rlock -k p --break --label ops
	[[ $stderr == *"broke rlock:{p}: the reservation for the --preempt request of "*" pid $r_pid [hotfix]"* ]] ||
		fail "$stderr"
	run -0 --separate-stderr rlock -k p --status
	# within the request's mark's 5 s: not busy any more
	run -0 --separate-stderr rlock -k p -n -- true
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'exiting 81' "$h_err"
	run -0 rlock -k p --history --json
	echo "$output" | jq -e --argjson pid "$r_pid" '[.entries[] | select(.event == "broken")] |
		length == 1 and .[0].cleared == "reservation" and .[0].pid == $pid and
		.[0].label == "hotfix" and .[0].by.label == "ops" and .[0].fence == null' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .cleared, .by.label]]')"
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 3' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
	# no run held the reservation: the text has no fence, no "fence ?"
	run -0 --separate-stderr rlock -k p --history
	assert_line --regexp "^[0-9-]+ [0-9:]+  broken      [^ ]+ pid $r_pid \[hotfix\]  cleared reservation  by [^ ]+ pid [0-9]+ \(user [^)]+\) \[ops\]\$"
}

@test "--reset on a name kept for a --preempt request clears nothing there and says the reservation stays, which --break removes" {
	local h_pid h_err r_pid
	reserved_dead
	run -0 --separate-stderr rlock -k p --reset
	[[ $stderr == *"nothing cleared"* ]] || fail "$stderr"
	[[ $stderr == *"rlock:{p} is still reserved for the --preempt request of "*" pid $r_pid [hotfix] until "*" left): --break removes it" ]] ||
		fail "$stderr"
	run -75 --separate-stderr rlock -k p --status
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
}

# mark_past MS: the --preempt request's mark (or the reservation it became) lasts past MS
mark_past() { (($(now_ms) + $(rcli PTTL 'rlock:{p}:preempt') > $1)); }
reservation_gone() { [[ $(rcli HGET 'rlock:{p}:preempt' handover) != 1 ]]; }

@test "a reservation that ends untaken lets a waiter in at once, not a nap later (its end wakes nobody)" {
	slow_job
	rlock_bg -k p -t 3s --preemptible --label nightly -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	# its mark lives 5 s (its -t) after each of its attempts: past the holder's lease end
	# from the first (no wait for a later attempt, up to a second)
	rlock_bg -k p -t 5s --preempt -w 60s --label hotfix -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	# The preempted holder renews no more: its lease ends at L (3 s at most from now),
	# its command's SIGKILL comes just before (137, not 3). Only the waiter's start
	# happens in that time (it used to wait first for the lease to run below 2.4 s, then
	# for the request's next attempt: past the SIGKILL on a loaded machine). Its nap
	# (2.5-5 s with a listener) passes L at once, or after one that did not; it naps until
	# L then (its lease left is shorter), and one that tries between the holder's release
	# and L naps until the reservation's end.
	rlock_bg -vv -k p -t 30s -w 60s -c 'echo "w $(date +%s%3N)" >>log'
	local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$w_err"
	local lease_end=$(($(now_ms) + $(rcli PTTL 'rlock:{p}')))
	# the request stops (alive, it would take the lock at once) when its mark outlives L:
	# the holder's release keeps the name for it past L, when the waiter tries again
	wait_until 30 mark_past $((lease_end + 200))
	kill -STOP "$r_pid"
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	wait_until 30 reservation_gone
	local end
	end=$(now_ms)
	kill -KILL "$r_pid"
	rlock_wait "$w_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$h_pid" 30
	((RLOCK_STATUS == 3)) || fail "exit $RLOCK_STATUS: $(cat "$h_err")"
	run ! grep -q 'r ran' log
	local w_at
	w_at=$(awk '$1 == "w" {print $2}' log)
	((w_at - end < 1000)) || fail "the waiter ran $((w_at - end)) ms after the reservation ended"
}

# field_differs KEY FIELD VALUE: the hash KEY's FIELD is not VALUE (a renewal moved it).
field_differs() { [[ $(rcli HGET "$1" "$2") != "$3" ]]; }

@test "a --preempt --supersede request replaced by a newer --supersede request withdraws its preempt request: the holder is not stopped for it" {
	# The replaced request's mark stayed (5 s) when it could not leave at once (stopped,
	# slow): the holder's next renewal stopped its command for it, its release kept the
	# name for a request that would never run (exit 80), and the newer one waited.
	# the holder renews every 3.3 s: its first renewal after it resumes finds the mark,
	# which lives 5 s after the stopped request's last attempt
	rlock_bg -k p -t 10s --preemptible -- ./job
	local h_pid=$RLOCK_PID r0
	wait_until 30 test -e h.started
	kill -STOP "$h_pid" # its renewals wait: the holder learns nothing until it resumes
	rlock_bg -k p -t 30s --preempt --supersede -w 60s -c 'echo "r1 ran" >>log'
	local r1_pid=$RLOCK_PID
	wait_until 30 key_exists 'rlock:{p}:preempt'
	kill -STOP "$r1_pid"
	r0=$(rcli HGET 'rlock:{p}:owner' renewed)
	local r1_tok
	r1_tok=$(rcli HGET 'rlock:{p}:preempt' token)
	rlock_bg -k p -t 30s --supersede -w 60s -c 'echo "r2 ran" >>log'
	local r2_pid=$RLOCK_PID
	wait_until 30 key_exists "rlock:{p}:superseded:$r1_tok"
	kill -CONT "$h_pid"
	wait_until 30 field_differs 'rlock:{p}:owner' renewed "$r0"
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$r2_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	kill -CONT "$r1_pid"
	rlock_wait "$r1_pid" 30
	assert_equal "$RLOCK_STATUS" 80
	run ! grep -q 'r1 ran' log
	grep -q 'r2 ran' log
	run ! grep -q 'h trapped' log
}

@test "a name kept for a --preempt --supersede request that a newer --supersede request replaced: the newer one takes it at once, not at the reservation's end" {
	slow_job
	rlock_bg -k p -t 3s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt --supersede -w 60s -c 'echo "r1 ran" >>log'
	local r1_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -STOP "$r1_pid" # alive, but it takes nothing while stopped
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	[[ $(rcli HGET 'rlock:{p}:preempt' handover) == 1 ]]
	local lease_end=$(($(now_ms) + $(rcli PTTL 'rlock:{p}:preempt')))
	rlock_bg -k p -t 30s --supersede -w 60s -c 'echo "r2 $(date +%s%3N)" >>log'
	local r2_pid=$RLOCK_PID
	rlock_wait "$r2_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	local r2_at
	r2_at=$(awk '$1 == "r2" {print $2}' log)
	((r2_at < lease_end)) || fail "r2 ran $((r2_at - lease_end)) ms after the reservation's end"
	# the preempted holder: its request never took the name, its own status (3), not 81
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'exiting 81' "$h_err"
	kill -CONT "$r1_pid"
	rlock_wait "$r1_pid" 30
	assert_equal "$RLOCK_STATUS" 80
	run ! grep -q 'r1 ran' log
}

@test "--preemptible stopped at --max-hold, then preempted for a request that gave up: 124 as timeout(1), never the command's own status (0 after a trap)" {
	slow_job
	# the trap exits 0: a command that cleaned up after --max-hold's SIGTERM
	sed -i 's/exit 3/exit 0/' slowjob
	rlock_bg -k p -t 3s --preemptible --max-hold 2s --kill-after 60s -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 h_trapped
	grep -q 'max-hold is over' "$h_err" || fail "$(cat "$h_err")"
	# during the trap's clean-up, a --preempt request; a short mark (1 s): gone soon after it
	rlock_bg -k p -t 1s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 grep -q 'lock lost: preempted by' "$h_err"
	kill -KILL "$r_pid"
	wait_until 15 key_absent 'rlock:{p}:preempt'
	touch h.go
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 124
	grep -q "that request gave up before the lock was released; exiting 124 (--max-hold" "$h_err" ||
		fail "$(cat "$h_err")"
	key_absent 'rlock:{p}' || fail "the lock was not released"
	run ! grep -q 'r ran' log
}

@test "--preempt during a --preemptible holder's min-hold keep (its command exited) takes the lock at once; a plain waiter, -n and a --preempt against a holder without --preemptible still wait the keep out" {
	printf 'min-hold = 60s\n' >keep.conf
	run -0 rlock --config keep.conf -k p --preemptible --label nightly -- true
	assert_equal "$(rcli HGET 'rlock:{p}:owner' kept)" 1
	# the class: neither -n, nor a plain waiter, takes a kept lock
	run -75 rlock -k p -n -- true
	run -75 rlock -k p -w 300ms -- true
	assert_equal "$(rcli HGET 'rlock:{p}:owner' kept)" 1
	local t0
	t0=$(now_ms)
	run -0 rlock -k p --preempt -w 20s --label hotfix -c 'echo "r start" >>log'
	(($(now_ms) - t0 < 10000)) || fail "waited $(($(now_ms) - t0)) ms for a keep"
	assert_equal "$(cat log)" "r start"
	# the run ended released once (its release wrote it); the request's run follows
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 0' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
	echo "$output" | jq -e '[.entries[] | select(.label == "hotfix") | .event] |
		index("acquired") != null' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
	assert_equal "$(rcli HMGET 'rlock:{p}:preempt' token handover | tr -d '\n')" ""
	# a holder without --preemptible: its keep holds against --preempt too
	run -0 rlock --config keep.conf -k q -- true
	run -75 rlock -k q --preempt -w 1s -- true
	assert_equal "$(rcli HGET 'rlock:{q}:owner' kept)" 1
}

@test "--preemptible with a configuration file's min-hold whose command ends on its own while a --preempt request waits: the release hands the lock over (no keep), exit 0, -v says so, the history says released 0" {
	printf 'min-hold = 60s\n' >keep.conf
	# a long lease: no renewal (the one that reads the request) before the command ends
	rlock_bg -v --config keep.conf -k p -t 60s --preemptible --label nightly -- ./job
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 3s --preempt -w 60s --label hotfix -c 'echo "r start" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 preempt_asked
	# the request cannot try again meanwhile: what the release did is what it left
	kill -STOP "$r_pid"
	rcli PEXPIRE 'rlock:{p}:preempt' 60000 >/dev/null
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	local kept handover
	kept=$(rcli HGET 'rlock:{p}:owner' kept)
	handover=$(rcli HGET 'rlock:{p}:preempt' handover)
	kill -CONT "$r_pid"
	assert_equal "$kept" ""
	assert_equal "$handover" 1
	# -v says what the release did: handed over, not kept (it said "--min-hold keeps it")
	grep -qx 'rlock: released rlock:{p} to a waiting --preempt request (not kept for --min-hold)' \
		"$h_err" || fail "holder's stderr: $(cat "$h_err")"
	! grep -q 'keeps it' "$h_err" || fail "said kept: $(cat "$h_err")"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(tail -n 1 log)" "r start"
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and .[0].status == 0' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
}

@test "a --preempt request that leaves (a signal) while the name is kept for it wakes the waiters of every mode at once, as a release does" {
	slow_job
	local mode
	for mode in -s --fair "-l 2"; do
		rm -f h.started h.go
		: >log
		# a 6 s lease: the waiter starts (and listens) before the preempted holder's
		# SIGKILL, due before its lease ends (a 3 s one left ~2.7 s: 137, not 3, on a
		# loaded machine)
		rlock_bg -k p -t 6s --preemptible -- ./slowjob
		local h_pid=$RLOCK_PID
		wait_until 30 test -e h.started
		rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r ran" >>log'
		local r_pid=$RLOCK_PID
		wait_until 30 h_trapped
		# shellcheck disable=SC2086 # the mode's words
		rlock_bg -vv -k p -t 30s $mode -w 60s -c 'echo "w $(date +%s%3N)" >>log'
		local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
		wait_until 30 grep -q 'listening for the release\|waiting for' "$w_err"
		# the request is away when the holder's release keeps the name for it
		kill -STOP "$r_pid"
		touch h.go
		wait_until 30 key_absent 'rlock:{p}'
		assert_equal "$(rcli HGET 'rlock:{p}:preempt' handover)" 1
		# it leaves: a signal, read before the wake-up the release left it
		kill -TERM "$r_pid"
		kill -CONT "$r_pid"
		rlock_wait "$r_pid" 30
		assert_equal "$RLOCK_STATUS" 143
		local left w_at
		left=$(now_ms)
		rlock_wait "$w_pid" 30
		assert_equal "$RLOCK_STATUS" 0
		rlock_wait "$h_pid" 30
		assert_equal "$RLOCK_STATUS" 3
		run ! grep -q 'r ran' log
		w_at=$(awk '$1 == "w" {print $2}' log)
		echo "# $mode: ran $((w_at - left)) ms after the request left" >&3
		((w_at - left < 500)) || fail "$mode: the waiter ran $((w_at - left)) ms after the request left"
	done
}

@test "a --preempt request that leaves while the name is kept for it takes the hand-over's fields with it: nothing of it left in the :preempt record" {
	# the withdrawal deleted the request's fields and left the hand-over's (from,
	# fstatus, hist, hret) till the key's end: --history read 'from' as a live
	# reservation and hid the preempted run's end
	slow_job
	rlock_bg -k p -t 3s --preemptible -- ./slowjob
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -STOP "$r_pid" # away when the holder's release keeps the name for it
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	assert_equal "$(rcli HGET 'rlock:{p}:preempt' handover)" 1
	kill -TERM "$r_pid"
	kill -CONT "$r_pid"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 143
	assert_equal "$(rcli HMGET 'rlock:{p}:preempt' token handover from fstatus hist hret | tr -d '\n')" ""
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'r ran' log
}

@test "a --preempt request SIGKILLed while the name is kept for it: the reservation ends by its own lease (5 s at most), a waiter gets in, the holder exits with its command's status" {
	slow_job
	rlock_bg -k p -t 3s --preemptible --label nightly -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 60s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -STOP "$r_pid"
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	assert_equal "$(rcli HGET 'rlock:{p}:preempt' handover)" 1
	local pttl
	pttl=$(rcli PTTL 'rlock:{p}:preempt')
	((pttl > 0 && pttl <= 5000)) || fail "the reservation lives $pttl ms"
	kill -KILL "$r_pid" # no clean-up: nothing withdraws it
	rlock_wait "$r_pid" 10
	run -0 --separate-stderr rlock -k p -w 10s -c 'echo "w ran" >>log'
	rlock_wait "$h_pid" 30
	((RLOCK_STATUS == 3)) || fail "exit $RLOCK_STATUS: $(cat "$h_err")"
	run ! grep -q 'exiting 81' "$h_err"
	run ! grep -q 'r ran' log
	grep -q 'w ran' log
	assert_equal "$(rcli EXISTS 'rlock:{p}:preempt')" 0
	# its run ends once, never preempted nor expired (its holder did not die): released
	# with its command's status, by its rlock that saw the reservation end, or by the
	# waiter's grant when that came first (the status kept with the open run)
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and (.[0].status | tostring) == "3"' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
}

@test "a --preempt request SIGKILLed while the name is kept for it, the waiter's grant before the holder's rlock looks: the holder's run ends released with its status, not expired" {
	slow_job
	rlock_bg -k p -t 3s --preemptible --label nightly -- ./slowjob
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 60s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 h_trapped
	kill -STOP "$r_pid"
	touch h.go
	wait_until 30 key_absent 'rlock:{p}'
	# the holder's rlock sees the reservation end only after the waiter got in
	kill -STOP "$h_pid"
	kill -KILL "$r_pid"
	rlock_wait "$r_pid" 10
	run -0 --separate-stderr rlock -k p -w 10s -c 'echo "w ran" >>log'
	kill -CONT "$h_pid"
	rlock_wait "$h_pid" 30
	((RLOCK_STATUS == 3)) || fail "exit $RLOCK_STATUS: $(cat "$h_err")"
	grep -q 'w ran' log
	run -0 rlock -k p --history --json
	echo "$output" | jq -e '[.entries[] | select(.label == "nightly" and .event != "acquired")] |
		length == 1 and .[0].event == "released" and (.[0].status | tostring) == "3"' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .label, .status]]')"
}

@test "a --preempt --once-per request handed a name that its holder's release marked done: it leaves, and the reservation's end wakes the waiters at once" {
	# a long lease: no renewal (the one that reads the request) before the command ends
	rlock_bg -k p -t 60s --preemptible --once-per 1h -- ./job
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt --once-per 1h -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 preempt_asked
	rlock_bg -vv -k p -t 30s -s -w 60s -c 'echo "w $(date +%s%3N)" >>log'
	local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$w_err"
	# its command ends well: the release marks the name done and hands it to the request
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 75 # done inside the window: -E's status
	local left w_at
	left=$(now_ms)
	rlock_wait "$w_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	run ! grep -q 'r ran' log
	reservation_gone
	w_at=$(awk '$1 == "w" {print $2}' log)
	echo "# ran $((w_at - left)) ms after the request left" >&3
	((w_at - left < 500)) || fail "the waiter ran $((w_at - left)) ms after the request left"
}

@test "--preemptible whose rlock is stopped after the command's stop, past its lease: not 'the release failed' (nothing was sent), the command's status, the requester runs after" {
	rlock_bg -k p -t 1s --preemptible --events "$PWD/ev" -- sh -c \
		'trap "touch trapped; sleep 10" TERM; touch h.started; sleep 30 & wait'
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 30 test -e h.started
	rlock_bg -k p -t 30s --preempt -w 60s -c 'echo "r ran" >>log'
	local r_pid=$RLOCK_PID
	wait_until 30 test -e trapped
	kill -STOP "$h_pid"
	wait_until 30 grep -q 'r ran' log # the lease ran out; the watchdog stopped the command
	kill -CONT "$h_pid"
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 137
	grep -q "its lease ended before rlock could release it" "$h_err" || fail "$(cat "$h_err")"
	run ! grep -q 'release failed' "$h_err"
	jq -e 'select(.event == "released") | .status == 137 and .reason == null' ev >/dev/null ||
		fail "$(cat ev)"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
}
