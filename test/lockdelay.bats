#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: for the shells the tests start; bats sets $stderr; each test exports its own PORT for the shells it starts
# --lock-delay DUR: a lease that ended without a release (its holder SIGKILLed, lost,
# broken with --break) keeps the name closed DUR more; a release (and --min-hold's end)
# opens it at once. The scripts enforce it (PREFIX{NAME}:delay), waiters sleep until it
# ends, --status and --list show it, and no key is left once it has ended. Times are
# the server's own (TIME), never this machine's guesses.

bats_require_minimum_version 1.5.0
load helpers

# server_ms: the server's clock now, in ms.
server_ms() {
	rcli EVAL "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)" 0
}

# lease_end_server KEY: when KEY's lease ends on the server's clock (TIME + PTTL, read
# in one step), or fail when it has no expiry left.
lease_end_server() {
	local e
	e=$(rcli EVAL "local p = redis.call('PTTL', KEYS[1]) if p < 0 then return -1 end
		local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) + p" 1 "$1")
	((e > 0)) || return 1
	echo "$e"
}

# a test that stops a server (SIGSTOP, its pid in PAUSED) resumes it on any way out
teardown() {
	local p
	for p in ${PAUSED:-}; do
		kill -CONT "$p" 2>/dev/null || true
	done
	common_teardown
}

# three_nodes [N]: three (or N) Redlock nodes; sets u (their URLs), pids, urls
# (comma-separated).
three_nodes() {
	local i
	u=() pids=()
	for ((i = 0; i < ${1:-3}; i++)); do
		redis_start
		u+=("$REDIS_URL")
		pids+=("$REDIS_PID")
	done
	urls=$(
		IFS=,
		echo "${u[*]}"
	)
}

# node_ms URL: that server's clock now, in ms.
node_ms() {
	redis-cli -u "$1" EVAL "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)" 0
}

# crashed_delay URL NAME: the delay entry a crashed holder (token deadbeef) leaves on the
# node at URL, closing NAME for 120 s by that node's clock, made by hand.
crashed_delay() {
	local now
	now=$(node_ms "$1")
	redis-cli -u "$1" ZADD "rlock:{$2}:delay" $((now + 120000)) deadbeef >/dev/null
	redis-cli -u "$1" PEXPIRE "rlock:{$2}:delay" 120000 >/dev/null
}

# The waiter's command: the server's clock when it starts (the lock just granted).
START='redis-cli -p "$PORT" EVAL "local t = redis.call('"'TIME'"') return t[1] * 1000 + math.floor(t[2] / 1000)" 0 >started.ms'

# only_fence NAME: the lock's keys are gone but its fence counter (its run history,
# expiring, the record of a --break, kept an hour, and a --min-hold keep's release
# mark, :rel:TOKEN, expiring with the lease: it closes nothing).
only_fence() {
	local k
	for k in $(rcli --scan --pattern "rlock:{$1}:rel:*"); do
		(($(rcli PTTL "$k") > 0)) || return 1
	done
	[[ $(rcli --scan --pattern "rlock:{$1}*" | grep -v -e ':history$' -e ':broken$' -e ':rel:' | sort | tr '\n' ' ') == "rlock:{$1}:fence " ]] &&
		history_expiring "rlock:{$1}:history"
}

# holder_killed NAME ARGS...: a holder of NAME with ARGS, SIGKILLed once its command runs;
# prints the lease end (server ms), read after the kill (nothing renews it since).
holder_killed() {
	local name=$1
	shift
	rlock_bg -k "$name" "$@" -- "$HOLD" h
	wait_until 10 test -e h.started
	kill -KILL "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20 || true
	lease_end_server "rlock:{$name}"
}

# has_waiter NAME: an rlock waits for NAME's release.
has_waiter() { (($(waiters "$1") >= 1)); }

# closed_only NAME: nobody holds NAME, and a lock-delay keeps it closed.
closed_only() {
	local out
	out=$("$RLOCK" --status --json -k "$1") # 75: held or closed
	[[ $out == *'"held":false'*'"closed":{"by":"lock-delay"'* ]]
}

@test "lock-delay: after the holder is SIGKILLed, a waiter starts no sooner than lease end + the delay" {
	export PORT=$REDIS_PORT
	local end
	# a 5 s delay: the five rlocks below run while it lasts (closed_only's --status, then
	# --status twice, --list, -n: 3 s was 0.6 s a run to spare, too little for a loaded
	# asan pass; with each start 0.7 s slower, the -n was let in: 0, not 75)
	end=$(holder_killed d -t 2s --lock-delay 5s)
	rlock_bg -k d -c "$START"
	local waiter=$RLOCK_PID
	wait_until 10 closed_only d
	# while closed: --status and --list say so, in text and JSON
	run -75 "$RLOCK" --status -k d
	assert_output --partial 'is closed by lock-delay until'
	run -75 "$RLOCK" --status --json -k d
	assert_output --partial '"closed":{"by":"lock-delay","left_ms":'
	run -0 "$RLOCK" --list
	assert_output --partial '[closed by lock-delay until'
	run -75 --separate-stderr "$RLOCK" -n -k d -- true
	[[ $stderr == *"closed by lock-delay for"* ]]
	rlock_wait "$waiter" 30
	((RLOCK_STATUS == 0))
	local started
	started=$(cat started.ms)
	echo "# lease end $end, waiter started $((started - end)) ms after it (delay 5000 ms)" >&3
	((started >= end + 5000)) || fail "started $((started - end)) ms after the lease end"
	# it woke when the delay ended, not at some later poll (generous: 10 s)
	((started < end + 5000 + 10000))
	only_fence d
}

@test "lock-delay: a --fair waiter keeps its place in the queue while it waits out the delay; a later one comes after it" {
	export PORT=$REDIS_PORT
	holder_killed q -t 2s --lock-delay 9s >/dev/null
	# F1 with the default ttl (30 s): its naps through the delay were up to 10 s, longer
	# than its place's 5 s lease, which then lapsed while it waited
	rlock_bg -k q --fair -w 40s -c 'echo F1 >>order'
	local f1=$RLOCK_PID s0
	placed() { [[ $(rcli ZCARD 'rlock:{q}:qlease') == 1 ]]; }
	wait_until 10 placed
	s0=$(rcli ZRANGE 'rlock:{q}:qlease' 0 0 WITHSCORES | tail -1)
	refreshed() {
		local s
		s=$(rcli ZRANGE 'rlock:{q}:qlease' 0 0 WITHSCORES | tail -1)
		[[ -n $s && -n $s0 ]] && ((s > s0))
	}
	# refreshed within a lease, not at the delay's end (about 10 s away)
	wait_until 7 refreshed || fail "F1's place was not refreshed while the name was closed"
	rlock_bg -k q --fair -w 40s -c 'echo F2 >>order'
	local f2=$RLOCK_PID
	rlock_wait "$f1" 40
	((RLOCK_STATUS == 0)) || fail "F1 exited $RLOCK_STATUS: $(cat "$BATS_TEST_TMPDIR"/rlock.2.err)"
	rlock_wait "$f2" 40
	((RLOCK_STATUS == 0))
	assert_equal "$(tr '\n' ' ' <order)" "F1 F2 "
}

@test "lock-delay: a normal release opens the name at once, and so does --min-hold's end" {
	export PORT=$REDIS_PORT
	rlock_bg -k r --lock-delay 60s -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID
	rlock_bg -k r -c "$START"
	local waiter=$RLOCK_PID
	wait_until 30 has_waiter r
	local released
	released=$(server_ms)
	touch h.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	rlock_wait "$waiter" 30
	((RLOCK_STATUS == 0))
	echo "# waiter started $(($(cat started.ms) - released)) ms after the release (delay 60 s)" >&3
	(($(cat started.ms) - released < 30000))
	only_fence r
	# --min-hold keeps the lock after its command, then it expires: no delay either
	run -0 "$RLOCK" -k m --lock-delay 60s --min-hold 1s -- true
	run -0 "$RLOCK" -w 30s -k m -- true
	only_fence m
}

@test "lock-delay: --break keeps the name closed for the delay" {
	export PORT=$REDIS_PORT
	rlock_bg -k b -t 4s --lock-delay 3s -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID broke
	broke=$(server_ms)
	run -0 "$RLOCK" --break -k b
	rlock_bg -k b -c "$START"
	local waiter=$RLOCK_PID
	run -75 "$RLOCK" --status -k b
	assert_output --partial 'is closed by lock-delay until'
	run -75 "$RLOCK" -n -k b -- true
	rlock_wait "$holder" 30 # its renewal finds the lock gone: lost
	((RLOCK_STATUS == 79))
	rlock_wait "$waiter" 60
	((RLOCK_STATUS == 0))
	echo "# broken at $broke, waiter started $(($(cat started.ms) - broke)) ms later (delay 3000 ms)" >&3
	(($(cat started.ms) >= broke + 3000))
	only_fence b
}

@test "lock-delay: a waiter's live line on a terminal counts the delay down (was: the first reply's figure, redrawn unchanged every second)" {
	rlock_bg -k tl -t 1s --lock-delay 2s -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID left
	run -0 "$RLOCK" --break -k tl # closed for the lease left (1 s at most), then 2 s
	(clean_exec script -qfec "$RLOCK -u $REDIS_URL -w 30s -k tl -- true; echo rlock-exit=\$? >exitcode" \
		/dev/null) </dev/null >tty-out 2>&1
	assert_equal "$(cat exitcode)" rlock-exit=0
	left=$(tr '\r' '\n' <tty-out | sed -n 's/.*closed by lock-delay for \([0-9.]*\)s more.*/\1/p')
	echo "# the live line's time left, each second: $(tr "\n" " " <<<"$left")" >&3
	(($(wc -l <<<"$left") >= 2)) || fail "drawn less than twice: $(cat -v tty-out)"
	awk 'NR == 1 { first = $1 } END { exit !($1 < first) }' <<<"$left" ||
		fail "the time left never went down: $(tr "\n" " " <<<"$left")"
	rlock_wait "$holder" 30 # its renewal finds the lock broken: lost
	((RLOCK_STATUS == 79))
	only_fence tl
}

@test "lock-delay: every mode (-s, -l, --fair, several -k) is closed after a crash" {
	local mode
	for mode in "-s" "-l 2" "--fair" "-k other"; do
		rcli FLUSHALL >/dev/null
		rm -f h.started
		# shellcheck disable=SC2086  # mode: its words
		holder_killed x $mode -t 1s --lock-delay 30s >/dev/null || true
		wait_until 10 closed_only x # the lease ran out, unreleased
		# shellcheck disable=SC2086
		run -75 --separate-stderr "$RLOCK" -n $mode -k x -- true
		[[ $stderr == *"closed by lock-delay"* ]] || fail "$mode: $stderr"
	done
}

@test "lock-delay: from the config file; bad values are a usage error (64)" {
	printf 'lock-delay = 30s\n' >conf
	run -0 "$RLOCK" --config conf -k c -- sh -c 'redis-cli -p '"$REDIS_PORT"' HGET "rlock:{c}:owner" delay'
	[[ $output == 30000 ]]
	run -64 --separate-stderr "$RLOCK" --lock-delay bogus -k c -- true
	assert_one_line_error
	run -64 --separate-stderr "$RLOCK" --lock-delay -1s -k c -- true
	assert_one_line_error
}

@test "lock-delay: Redlock over 3 nodes: each node closed after a crash; status says so" {
	local u pids urls i
	three_nodes
	rlock_bg -k rl --url "$urls" -t 1s --lock-delay 30s -- "$HOLD" h
	wait_until 10 test -e h.started
	kill -KILL "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20 || true
	wait_until 10 bash -c '! "$0" --url "$1" --status --json -k rl | grep -q "\"held\":true"' "$RLOCK" "$urls"
	run -75 "$RLOCK" --url "$urls" --status -k rl
	assert_output --partial 'closed by lock-delay until'
	run -75 --separate-stderr "$RLOCK" --url "$urls" -n -k rl -- true
	[[ $stderr == *"closed by lock-delay"* ]]
	for i in 0 1 2; do
		[[ $(redis-cli -u "${u[$i]}" EXISTS 'rlock:{rl}:delay') == 1 ]]
		redis_stop "${pids[$i]}"
	done
}

@test "--reset: lifts a lock-delay after --break (which says the name stays closed), wakes the waiter, records who; never a live holder; clears a --once-per mark" {
	# a holder with a long lock-delay, broken: the name stays closed, and --break says so
	rlock_bg -k rs -t 2s --lock-delay 1h -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	run -0 --separate-stderr "$RLOCK" -k rs --break
	assert_regex "$stderr" "rlock:\{rs\} stays closed by --lock-delay for [0-9hms]+ more .*; rlock -k rs --reset opens it now"
	rlock_wait "$holder" 20
	# a second --break: nothing removed, still closed, same hint
	run -0 --separate-stderr "$RLOCK" -k rs --break
	assert_regex "$stderr" "was not held: nothing removed"$'\n'".*stays closed by --lock-delay for [0-9hms]+ more"
	run -75 "$RLOCK" -k rs --status
	assert_output --partial '--reset opens it'
	# a waiter sleeps on the delay; --reset opens the name and it runs at once
	rlock_bg -k rs -w 60 -- true
	local waiter=$RLOCK_PID t0
	wait_until 10 closed_only rs
	t0=$(now_ms)
	run -0 --separate-stderr "$RLOCK" -q -k rs --label 'INC-42' --reset
	assert_regex "$stderr" "^rlock: reset rlock:\{rs\}: lifted the lock-delay \([0-9hms]+ were left\)$"
	rlock_wait "$waiter" 20
	assert_equal "$RLOCK_STATUS" 0
	local ms=$(($(now_ms) - t0))
	((ms < 10000)) || fail "the waiter took ${ms} ms after --reset"
	# the history says who reset it
	run -0 "$RLOCK" -k rs --history --json
	assert_output --regexp '"event":"reset"[^}]*"cleared":"lock-delay","by":\{"host":"[^"]+","pid":[0-9]+,"user":"'"$(id -un)"'","label":"INC-42"\}'
	run -0 "$RLOCK" -k rs --history
	assert_output --regexp "reset .* cleared lock-delay  by [^ ]+ pid [0-9]+ \(user $(id -un)\) \[INC-42\]"
	# nothing left to clear: says so, exit 0
	run -0 --separate-stderr "$RLOCK" -k rs --reset
	assert_regex "$stderr" "no lock-delay and no --once-per mark: nothing cleared"
	# a live holder stays (that is --break's business)
	rlock_bg -k rs --lock-delay 1h -- "$HOLD" live
	holder=$RLOCK_PID
	wait_until 10 test -e live.started
	run -0 --separate-stderr "$RLOCK" -k rs --reset
	assert_regex "$stderr" "rlock:\{rs\} is still held by .* \(a live holder: --break removes it\)"
	run -75 "$RLOCK" -k rs -n -- true
	touch live.release
	rlock_wait "$holder" 20
	assert_equal "$RLOCK_STATUS" 0
	run -0 "$RLOCK" -k rs -n -- true # released: its delay ended with it
	# a --once-per window: skipped until --reset clears it
	run -0 "$RLOCK" -k op --once-per 1h -- true
	run -75 --separate-stderr "$RLOCK" -k op --once-per 1h -- true
	assert_regex "$stderr" "; --reset clears the mark"
	run -0 --separate-stderr "$RLOCK" -k op --reset
	assert_regex "$stderr" "reset rlock:\{op\}: cleared the --once-per mark of fence 1 \([0-9hms]+ were left\)"
	run -0 "$RLOCK" -k op --once-per 1h -- echo again
	assert_output again
}

@test "lock-delay: Redlock, a node that lagged past the lease: the holder locks it again (its own entry closes nothing to it), and its release opens every node" {
	# The third node is stopped longer than the lease while the holder renews on the
	# other two: there its lease runs out, its delay entry left. Resumed, the holder's
	# renewal locks it again; its own entry used to refuse it there (closed by
	# lock-delay, to the holder itself): the holder ran on two nodes to its end, and the
	# node stayed closed for the delay after the release (the next holder degraded; one
	# more node away, the name closed).
	local u pids urls tok stop
	three_nodes
	rlock_bg -k rl --url "$urls" -t 3s --lock-delay 60s -- "$HOLD" h
	wait_until 30 test -e h.started
	tok=$(redis-cli -u "${u[0]}" GET 'rlock:{rl}')
	[[ -n $tok ]]
	stop=$(node_ms "${u[0]}")
	PAUSED=${pids[2]}
	kill -STOP "${pids[2]}"
	# past the lease the third node saw last (renewed before the stop): by the first
	# node's clock, which the third node's shares (one machine)
	wait_until 30 bash -c '(($("$0" -u "$1" EVAL "local t = redis.call(\"TIME\") return t[1] * 1000 + math.floor(t[2] / 1000)" 0) > $2 + 3500))' redis-cli "${u[0]}" "$stop"
	[[ $(redis-cli -u "${u[0]}" GET 'rlock:{rl}') == "$tok" ]] || fail "the holder lost its quorum"
	kill -CONT "${pids[2]}"
	PAUSED=
	wait_until 30 bash -c '[[ $(redis-cli -u "$0" GET "rlock:{rl}") == "$1" ]]' "${u[2]}" "$tok" ||
		fail "the holder never locked the third node again: $(redis-cli -u "${u[2]}" ZRANGE 'rlock:{rl}:delay' 0 -1 WITHSCORES | paste -sd' ') $(cat "$RLOCK_ERR")"
	touch h.release
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	local i
	for i in 0 1 2; do
		[[ $(redis-cli -u "${u[$i]}" EXISTS 'rlock:{rl}:delay') == 0 ]] || fail "node $i kept a lock-delay after the release"
	done
	# one node away: the other two are a quorum, open
	PAUSED=${pids[0]}
	kill -STOP "${pids[0]}"
	run -0 --separate-stderr "$RLOCK" --url "$urls" -n -k rl -- true
	kill -CONT "${pids[0]}"
	PAUSED=
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, the release opens a node where the lease had run out (it lagged): no node stays closed" {
	# What a node that lagged past the lease holds when the release reaches it before the
	# holder's next renewal locks it again: the lock and its owner's record expired, the
	# holder's delay entry left. Made by hand on the third node (a long lease: no renewal
	# comes meanwhile). The release used to leave the entry there (not its lock any
	# more): that node closed for the delay after a release.
	local u pids urls i
	three_nodes
	rlock_bg -k rl --url "$urls" -t 60s --lock-delay 60s -- "$HOLD" h
	wait_until 30 test -e h.started
	redis-cli -u "${u[2]}" DEL 'rlock:{rl}' 'rlock:{rl}:owner' >/dev/null
	[[ $(redis-cli -u "${u[2]}" EXISTS 'rlock:{rl}:delay') == 1 ]]
	touch h.release
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	for i in 0 1 2; do
		[[ $(redis-cli -u "${u[$i]}" EXISTS 'rlock:{rl}:delay') == 0 ]] || fail "node $i kept a lock-delay after the release"
	done
	run -0 --separate-stderr "$RLOCK" --url "$urls" -n -k rl -- true
	[[ $stderr != *degraded* ]] || fail "$stderr"
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: a holder broken before its next renewal keeps the name closed after its release (history on and off)" {
	# The release of a holder that has not learnt of the --break yet finds the lock gone:
	# it opens no lock-delay (the :broken record names it), as the rule for a release on
	# a node where the lease ran out (above) must not.
	local h
	for h in 50 0; do
		printf 'history = %s\n' "$h" >conf
		rlock_bg --config conf -k "b$h" -t 60s --lock-delay 60s -- "$HOLD" "h$h"
		wait_until 30 test -e "h$h.started"
		local holder=$RLOCK_PID
		run -0 "$RLOCK" --config conf -k "b$h" --break
		touch "h$h.release"
		rlock_wait "$holder" 30
		assert_equal "$RLOCK_STATUS" 79
		run -75 "$RLOCK" --config conf -k "b$h" --status
		assert_output --partial 'closed by lock-delay'
	done
}

@test "lock-delay: Redlock, --status with a node silent: closed on a majority with it is never 'free' (69, cannot tell)" {
	# A holder that crashed with its delay entries on the first and third nodes (the
	# second lagged through its acquire), made by hand; the third node stopped. An
	# acquire is refused (closed on the first, no quorum without the third); --status
	# said free, exit 0.
	local u pids urls i
	three_nodes
	for i in 0 2; do
		crashed_delay "${u[$i]}" rl
	done
	run -75 "$RLOCK" --url "$urls" --status -k rl
	assert_output --partial 'closed by lock-delay until'
	PAUSED=${pids[2]}
	kill -STOP "${pids[2]}"
	run -75 "$RLOCK" --url "$urls" -n -k rl -- true # what an acquire finds
	run -69 --separate-stderr "$RLOCK" --url "$urls" --status -k rl
	assert_output ''
	assert_regex "$stderr" "^rlock: cannot tell whether rlock:\{rl\} is held: 1 of 3 Redlock nodes have it closed by a lock-delay, 1 did not answer \(2 needed\)"
	run -69 --separate-stderr "$RLOCK" --url "$urls" --status --json -k rl
	assert_output ''
	kill -CONT "${pids[2]}"
	PAUSED=
	run -75 "$RLOCK" --url "$urls" --status -k rl
	assert_output --partial 'closed by lock-delay until'
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, a split vote on a node closed by a lock-delay says how long it stays closed there, never '-'" {
	# Node 0 closed by a crashed holder's delay, node 1 grants (given back), node 2
	# stopped: a split vote. -n said "closed by lock-delay for - more".
	local u pids urls
	three_nodes
	crashed_delay "${u[0]}" rl
	PAUSED=${pids[2]}
	kill -STOP "${pids[2]}"
	run -75 --separate-stderr "$RLOCK" --url "$urls" -n -k rl -- true
	assert_regex "$stderr" "lock 'rl' is busy: closed by lock-delay for (1m[0-9][0-9]s|2m00s) more"
	[[ $stderr != *'for - more'* ]]
	# a waiter's -v lines and its end say the same
	run -75 --separate-stderr "$RLOCK" --url "$urls" -v -w 0.3s -k rl -- true
	assert_regex "$stderr" "closed by lock-delay for (1m[0-9][0-9]s|2m00s) more"
	[[ $stderr != *'for - more'* ]]
	kill -CONT "${pids[2]}"
	PAUSED=
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, a split vote where the other nodes are closed by a lock-delay: the waiter pauses until the delay's end they report, not 50-250 ms at a time; then it takes the lock" {
	# nodes 0 and 2 closed for 1.5 s by their clocks, node 1 free: every attempt is a
	# split vote (node 1 grants, given back). Retried every 50-250 ms it split ~10 times.
	local u pids urls i now
	three_nodes
	for i in 0 2; do
		now=$(node_ms "${u[$i]}")
		redis-cli -u "${u[$i]}" ZADD 'rlock:{sd}:delay' $((now + 1500)) deadbeef >/dev/null
		redis-cli -u "${u[$i]}" PEXPIRE 'rlock:{sd}:delay' 1500 >/dev/null
	done
	run -0 --separate-stderr "$RLOCK" --url "$urls" -vv -w 10s -k sd -- true
	local n
	n=$(grep -c 'split vote' <<<"$stderr" || true)
	echo "# split votes while the delay lasted: $n" >&3
	((n >= 1 && n <= 3)) || fail "$n split votes: $(grep 'split vote' <<<"$stderr" | tail -3)"
	# -vv names the cause: not "held by another token" (no token holds them)
	grep 'split vote' <<<"$stderr" | grep -q 'closed by a lock-delay' ||
		fail "the split vote's line does not say the lock-delay: $(grep 'split vote' <<<"$stderr")"
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: a reservation or a split with no expiry (set by hand) is said without a time, never 'until ?' or '- left'" {
	# single server: a --preempt hand-over set by hand, no PTTL
	rcli HSET 'rlock:{rv}:preempt' handover 1 token tok1 host h1 pid 42 >/dev/null
	run -75 "$RLOCK" --status -k rv
	assert_output --partial 'rlock:{rv} is reserved for the --preempt request of h1 pid 42: its preempted holder'
	refute_output --partial 'until ?'
	refute_output --partial '- left'
	run -75 --separate-stderr "$RLOCK" -n -k rv -- true
	assert_regex "$stderr" "busy: reserved for the --preempt request of h1 pid 42$"
	run -0 "$RLOCK" --list
	assert_output --partial '[reserved for the --preempt request of h1 pid 42]'
	run -75 "$RLOCK" --status --json -k rv
	assert_equal "$(jq -c '[.reserved.left_ms, .reserved.until_ms]' <<<"$output")" '[null,null]'
	# Redlock: two tokens on two nodes of three, neither with an expiry
	local u pids urls
	three_nodes
	redis-cli -u "${u[0]}" SET 'rlock:{sp}' aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa >/dev/null
	redis-cli -u "${u[1]}" SET 'rlock:{sp}' bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb >/dev/null
	run -75 "$RLOCK" --url "$urls" --status -k sp
	assert_output --partial 'none on a majority; an acquire is refused while they hold (no expiry: set by hand?)'
	refute_output --partial 'until ?'
	refute_output --partial '- left'
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, a reservation with no expiry on one node and 2m on another: its time is the 2m copy's, not 'no expiry'" {
	# The majority (2 of 3) holds while both copies do: the one with an expiry ends it.
	# The copy without one sorted last (-1) and the reservation was said without a time.
	local u pids urls i
	three_nodes
	for i in 0 1; do
		redis-cli -u "${u[$i]}" HSET 'rlock:{rv}:preempt' handover 1 token tok1 host h1 pid 42 >/dev/null
	done
	redis-cli -u "${u[0]}" PEXPIRE 'rlock:{rv}:preempt' 120000 >/dev/null
	run -75 "$RLOCK" --url "$urls" --status -k rv
	assert_output --partial 'rlock:{rv} is reserved for the --preempt request of h1 pid 42 until'
	run -75 "$RLOCK" --url "$urls" --status --json -k rv
	assert_equal "$(jq -c '[.reserved.left_ms > 100000, .reserved.left_ms <= 120000]' <<<"$output")" '[true,true]'
	run -0 "$RLOCK" --url "$urls" --list
	assert_output --partial '[reserved for the --preempt request of h1 pid 42 until'
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, reservations of two requests that crossed: the one on a majority is said, none on a majority is busy (75), never free" {
	# rv: tok1 on node 0, tok2 on nodes 1 and 2 (a majority); r3: a different request's
	# on each node. Only the first node's request was counted: --status said rv and r3
	# free (0) and --list left them out, while every acquire but tok2's was refused.
	local u pids urls i
	three_nodes
	redis-cli -u "${u[0]}" HSET 'rlock:{rv}:preempt' handover 1 token tok1 host h1 pid 41 >/dev/null
	for i in 1 2; do
		redis-cli -u "${u[$i]}" HSET 'rlock:{rv}:preempt' handover 1 token tok2 host h2 pid 42 >/dev/null
	done
	for i in 0 1 2; do
		redis-cli -u "${u[$i]}" HSET 'rlock:{r3}:preempt' handover 1 token "tok$i" host "h$i" pid 4$i >/dev/null
		redis-cli -u "${u[$i]}" PEXPIRE 'rlock:{rv}:preempt' 120000 >/dev/null
		redis-cli -u "${u[$i]}" PEXPIRE 'rlock:{r3}:preempt' 120000 >/dev/null
	done
	# -n names the request most nodes keep it for, as --status does (it named node 0's)
	run -75 --separate-stderr "$RLOCK" --url "$urls" -n -k rv -- true
	assert_regex "$stderr" "busy: reserved for the --preempt request of h2 pid 42 for"
	run -75 "$RLOCK" --url "$urls" --status -k rv
	assert_output --partial 'rlock:{rv} is reserved for the --preempt request of h2 pid 42 until'
	run -75 "$RLOCK" --url "$urls" --status --json -k rv
	assert_equal "$(jq -c '[.held, .reserved.token, .reserved.left_ms > 100000]' <<<"$output")" '[false,"tok2",true]'
	run -75 "$RLOCK" --url "$urls" -n -k r3 -- true
	run -75 "$RLOCK" --url "$urls" --status -k r3
	assert_output --partial 'rlock:{r3} is not free: busy on 3 of 3 Redlock nodes (kept for a --preempt request on 3), none on a majority; an acquire is refused until'
	run -75 "$RLOCK" --url "$urls" --status --json -k r3
	assert_equal "$(jq -c '[.held, .reserved, .split.nodes_reserved]' <<<"$output")" '[false,null,3]'
	run -0 "$RLOCK" --url "$urls" --list
	assert_line --regexp '^r3 +- +- +- +[0-9ms]+ +\[busy on 3 of 3 Redlock nodes \(kept for a --preempt request on 3\), none on a majority\]$'
	assert_line --regexp '^rv +- +- +- +[0-9ms]+ +\[reserved for the --preempt request of h2 pid 42 until '
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, --list with a node silent: a name it could make closed, reserved or held is 'cannot tell' in its own row (69), the others listed" {
	# rl: a crashed holder's delay on nodes 0 and 2; rv: a --preempt hand-over on
	# nodes 0 and 2; hh: a holder on nodes 0 and 2; held: a live holder; node 2 stopped. --list exited 69 with nothing
	# listed (rl), or left rv out as free, and --status said rv free (0).
	local u pids urls i
	three_nodes
	for i in 0 2; do
		crashed_delay "${u[$i]}" rl
		redis-cli -u "${u[$i]}" HSET 'rlock:{rv}:preempt' handover 1 token tok1 host h1 pid 42 >/dev/null
		redis-cli -u "${u[$i]}" PEXPIRE 'rlock:{rv}:preempt' 120000 >/dev/null
		redis-cli -u "${u[$i]}" SET 'rlock:{hh}' cccccccccccccccccccccccccccccccc PX 120000 >/dev/null
	done
	# cr: closed on nodes 0 and 1 (a majority), a hand-over on nodes 0 and 2: closed
	for i in 0 1; do
		crashed_delay "${u[$i]}" cr
	done
	for i in 0 2; do
		redis-cli -u "${u[$i]}" HSET 'rlock:{cr}:preempt' handover 1 token tok1 host h1 pid 42 >/dev/null
		redis-cli -u "${u[$i]}" PEXPIRE 'rlock:{cr}:preempt' 120000 >/dev/null
	done
	rlock_bg --url "$urls" -k held -- "$HOLD" h
	wait_until 10 test -e h.started
	run -75 "$RLOCK" --url "$urls" --status -k rv
	assert_output --partial 'rlock:{rv} is reserved for the --preempt request of h1 pid 42 until'
	PAUSED=${pids[2]}
	kill -STOP "${pids[2]}"
	run -69 --separate-stderr "$RLOCK" --url "$urls" --status -k rv
	assert_output ''
	assert_regex "$stderr" "^rlock: cannot tell whether rlock:\{rv\} is held: 1 of 3 Redlock nodes have it kept for a --preempt request, 1 did not answer \(2 needed\)"
	run -75 "$RLOCK" --url "$urls" --status -k cr # closed on a majority: that is known
	assert_output --partial 'rlock:{cr} is closed by lock-delay until'
	run -69 --separate-stderr "$RLOCK" --url "$urls" --list
	assert_line --index 0 --regexp '^NAME +HOST'
	assert_line --index 1 --regexp '^cr +- +- +- +[0-9ms]+ +\[closed by lock-delay until '
	assert_line --index 2 --regexp '^held +[^ ]+ +[0-9]+ '
	assert_line --index 3 --regexp '^hh +- +- +- +- +\[cannot tell: 1 of 3 Redlock nodes have its holder, 1 did not answer \(2 needed\)\]$'
	assert_line --index 4 --regexp '^rl +- +- +- +- +\[cannot tell: 1 of 3 Redlock nodes have it closed by a lock-delay, 1 did not answer \(2 needed\)\]$'
	assert_line --index 5 --regexp '^rv +- +- +- +- +\[cannot tell: 1 of 3 Redlock nodes have it kept for a --preempt request, 1 did not answer \(2 needed\)\]$'
	[[ ${#lines[@]} == 6 ]]
	assert_regex "$stderr" "^rlock: --list: cannot tell whether rlock:\{hh\} is held: 1 of 3 Redlock nodes have its holder"
	assert_regex "$stderr" "rlock: --list: cannot tell whether rlock:\{rl\} is held: 1 of 3 Redlock nodes have it closed by a lock-delay"
	assert_regex "$stderr" "rlock: --list: cannot tell whether rlock:\{rv\} is held: 1 of 3 Redlock nodes have it kept for a --preempt request"
	run -69 --separate-stderr "$RLOCK" --url "$urls" --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name != "cr") | [.name, .held, .cannot_tell, .nodes_ok, .nodes_total, .closed, .reserved]]' <<<"$output")" \
		'[["held",true,null,2,3,null,null],["hh",null,"1 of 3 Redlock nodes have its holder, 1 did not answer (2 needed)",2,3,null,null],["rl",null,"1 of 3 Redlock nodes have it closed by a lock-delay, 1 did not answer (2 needed)",2,3,null,null],["rv",null,"1 of 3 Redlock nodes have it kept for a --preempt request, 1 did not answer (2 needed)",2,3,null,null]]'
	kill -CONT "${pids[2]}"
	PAUSED=
	run -0 "$RLOCK" --url "$urls" --list
	assert_output --partial '[closed by lock-delay until'
	assert_output --partial '[reserved for the --preempt request of h1 pid 42 until'
	touch h.release
	rlock_wait "$RLOCK_PID" 20
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock, a holder on one node and a lock-delay on another: not free (75) in --status and --list, as an acquire finds it" {
	# 3 nodes: a stale holder on node 0, a crashed holder's delay on node 1: one node
	# free, no majority. -n was refused (75) while --status said free (0) and --list
	# left the name out: each looked for one thing on a majority.
	local u pids urls
	three_nodes
	redis-cli -u "${u[0]}" SET 'rlock:{mx}' cccccccccccccccccccccccccccccccc PX 120000 >/dev/null
	crashed_delay "${u[1]}" mx
	run -75 "$RLOCK" --url "$urls" -n -k mx -- true
	run -75 "$RLOCK" --url "$urls" --status -k mx
	assert_output --partial 'rlock:{mx} is not free: busy on 2 of 3 Redlock nodes (held on 1 by 1 token, closed by a lock-delay on 1), none on a majority; an acquire is refused until'
	run -75 "$RLOCK" --url "$urls" --status --json -k mx
	assert_equal "$(jq -c '[.held, .split.nodes, .split.nodes_held, .split.nodes_closed, .split.nodes_reserved, .split.nodes_queued, (.split.left_ms > 0)]' <<<"$output")" '[false,2,1,1,0,0,true]'
	run -0 "$RLOCK" --url "$urls" --list
	assert_line --regexp '^mx +- +- +- +[0-9ms]+ +\[busy on 2 of 3 Redlock nodes \(held on 1 by 1 token, closed by a lock-delay on 1\), none on a majority\]$'
	assert_equal "$(grep -c '^mx ' <<<"$output")" 1
	for i in 0 1 2; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock over 4 nodes, a lock-delay on 2 of them: not free (75), though on no majority" {
	# 4 nodes need 3: two closed leave two free, too few. --status said free (0).
	local u pids urls i
	three_nodes 4
	for i in 0 1; do
		crashed_delay "${u[$i]}" m4
	done
	run -75 "$RLOCK" --url "$urls" -n -k m4 -- true
	run -75 "$RLOCK" --url "$urls" --status -k m4
	assert_output --partial 'busy on 2 of 4 Redlock nodes (closed by a lock-delay on 2), none on a majority'
	run -0 "$RLOCK" --url "$urls" --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "m4") | .split.nodes_closed]' <<<"$output")" '[2]'
	for i in 0 1 2 3; do redis_stop "${pids[$i]}"; done
}

@test "--reset over Redlock: a lock-delay on no majority of the nodes, which kept the name busy, is lifted and said so, not 'nothing cleared'" {
	local u pids urls i
	three_nodes 4
	for i in 0 1; do
		crashed_delay "${u[$i]}" r4
	done
	run -75 "$RLOCK" --url "$urls" --status -k r4
	run -0 --separate-stderr "$RLOCK" --url "$urls" -k r4 --reset
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^rlock: reset rlock:\{r4\}: lifted the lock-delay \([0-9hms]+ were left\)$'
	for i in 0 1; do
		[[ $(redis-cli -u "${u[$i]}" EXISTS 'rlock:{r4}:delay') == 0 ]] || fail "node $i stays closed"
	done
	run -0 "$RLOCK" --url "$urls" --status -k r4
	# nothing left: a second reset says so
	run -0 --separate-stderr "$RLOCK" --url "$urls" -k r4 --reset
	assert_regex "$stderr" 'had no lock-delay and no --once-per mark: nothing cleared'
	for i in 0 1 2 3; do redis_stop "${pids[$i]}"; done
}

@test "lock-delay: Redlock over 5 nodes, a holder on one, a lock-delay on another, a third paused: cannot tell (69), never free" {
	# 5 nodes need 3: two free answered, the paused one could be either. --status
	# said free (0): the holder and the delay, each alone, could not be a majority.
	local u pids urls i
	three_nodes 5
	redis-cli -u "${u[0]}" SET 'rlock:{m5}' cccccccccccccccccccccccccccccccc PX 120000 >/dev/null
	crashed_delay "${u[1]}" m5
	PAUSED=${pids[2]}
	kill -STOP "${pids[2]}"
	run -69 --separate-stderr "$RLOCK" --url "$urls" --io-timeout 1s --status -k m5
	assert_regex "$stderr" "cannot tell whether rlock:\{m5\} is held: 2 of 5 Redlock nodes have a holder or a lock-delay, 1 did not answer \(3 needed\)"
	kill -CONT "${pids[2]}"
	PAUSED=
	for i in 0 1 2 3 4; do redis_stop "${pids[$i]}"; done
}
