#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the commands rlock runs; bats sets $output
# Lock modes (issue 9): shared locks (-s, writers preferred), counting semaphores
# (-l N, each permit its own lease), the fair queue (--fair), and how they mix.
# A probe command logs "+ TAG NS" on entry and "- TAG NS" on exit (appends of one
# short line are atomic): the occupancy is replayed from the log. After every test the
# keys under the prefix return to the baseline: the fence counters only.

load helpers

export BATS_TEST_TIMEOUT=90

setup() {
	common_setup
	PROBE=$BATS_TEST_TMPDIR/probe
	LOG=$BATS_TEST_TMPDIR/occupancy.log
	cat >"$PROBE" <<EOF
#!/bin/sh
# probe TAG SECONDS
echo "+ \$1 \$(date +%s%N)" >>'$LOG'
sleep "\$2"
echo "- \$1 \$(date +%s%N)" >>'$LOG'
EOF
	chmod +x "$PROBE"
	: >"$LOG"
}

# a test that fills the server (maxmemory) leaves it usable, passed or failed
# shellcheck disable=SC2317  # bats calls it
teardown() {
	rcli CONFIG SET maxmemory 0 >/dev/null
	common_teardown
}

# Only fence counters left (the one documented key that never expires), run histories
# that expire within their retention, the record of a --break (it lives an hour), and a
# --min-hold keep's release mark (:rel:TOKEN, expiring with the lease).
# Writer marks of waiters that gave up and --min-hold leases end by their ttl: polled.
only_fences() {
	local keys k
	keys=$(rcli --scan --pattern '*' | grep -v -e ':fence$' -e ':broken$' || true)
	for k in $keys; do
		# a --min-hold keep's release mark (expires with the lease); the newest --supersede
		# request (:supersede:last, kept as long as the history)
		if [[ $k == *:rel:* || $k == *:supersede:last ]]; then
			(($(rcli PTTL "$k") > 0)) || return 1
			continue
		fi
		[[ $k == *:history ]] && history_expiring "$k" || return 1
	done
}

teardown() {
	common_teardown
	wait_until 15 only_fences || {
		rcli --scan --pattern '*' >&2
		return 1
	}
}

# max_occupancy [TAG-REGEX]: the most probes inside at once (exits before entries at
# the same instant, so a hand-off is not counted as an overlap).
max_occupancy() {
	sort -k3,3n -k1,1r "$LOG" | awk -v re="${1:-.}" '
		$2 ~ re { n += ($1 == "+") ? 1 : -1; if (n > max) max = n }
		END { print max + 0 }'
}

# overlaps_with TAG: entries of other probes while TAG was inside (0 = never overlapped).
overlaps_with() {
	sort -k3,3n -k1,1r "$LOG" | awk -v t="$1" '
		$2 == t { inside = ($1 == "+"); if (inside) bad += others; next }
		{ others += ($1 == "+") ? 1 : -1; if (inside && $1 == "+") bad++ }
		END { print bad + 0 }'
}

start_probe() { # start_probe TAG SECONDS RLOCK-ARGS...
	local tag=$1 secs=$2
	shift 2
	rlock_bg "$@" -- "$PROBE" "$tag" "$secs"
	eval "PID_$tag=$RLOCK_PID"
}

entered() { grep -q "^+ $1 " "$LOG"; }
writer_marked_or_in() { key_exists 'rlock:{stream}:writer' || entered w; }
queue_len() { [[ $(rcli ZCARD 'rlock:{'"$1"'}:queue') == "$2" ]]; }

# commands_per_acquisition P RLOCK-ARGS...: P contenders, one short run each; prints
# the script requests (EVALSHA and EVAL, not counting NOSCRIPT retries nor the
# commands inside the scripts) per acquisition, as issue 10 counts them.
commands_per_acquisition() {
	local p=$1 i total st=0 pids=()
	shift
	rcli CONFIG RESETSTAT >/dev/null
	# plain background jobs (each bounded by timeout(1)): cheaper than rlock_bg's
	# launcher and tracking for 32 processes at a time
	for ((i = 0; i < p; i++)); do
		timeout -s KILL 60 "$RLOCK" "$@" -- sleep 0.02 3>&- 4>&- &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || st=$?
	done
	((st == 0)) || fail "a contender exited $st"
	total=$(rcli INFO commandstats | tr -d '\r' |
		awk -F'[:=,]' '$1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { s += $3 - $11 } END { print s + 0 }')
	echo "scale=1; $total / $p" | bc
}

@test "shared: readers overlap, a writer never overlaps anyone, keys back to baseline" {
	local i
	for i in 1 2 3; do start_probe "r$i" 1 -s -k rw; done
	wait_until 20 entered r3
	start_probe w 0.3 -k rw
	for i in 4 5 6; do start_probe "r$i" 1 -s -k rw; done
	for p in "$PID_r1" "$PID_r2" "$PID_r3" "$PID_w" "$PID_r4" "$PID_r5" "$PID_r6"; do
		rlock_wait "$p" 40
		((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS"
	done
	local readers
	readers=$(max_occupancy '^r')
	echo "# shared: max readers inside at once $readers; entries while the writer was in: $(overlaps_with w)" >&3
	((readers >= 2)) || fail "readers never overlapped: $(cat "$LOG")"
	assert_equal "$(overlaps_with w)" 0
	assert_equal "$(rcli GET 'rlock:{rw}:fence')" 7
}

@test "shared: a writer waiting behind a stream of readers gets in (writers preferred)" {
	# Readers arrive every 0.2 s and stay 0.6 s: without writer preference the lock is
	# never free of readers until the stream ends.
	local i pids=()
	for i in $(seq 1 12); do
		start_probe "r$i" 0.6 -s -k stream
		pids+=("$RLOCK_PID")
		if ((i == 3)); then
			wait_until 20 entered r3
			start_probe w 0.1 -k stream
			# the writer waits (its mark is set) before the next reader asks, however
			# slow its start: else readers that asked first rightly go ahead of it
			wait_until 30 writer_marked_or_in || fail "the writer neither waited nor entered"
		fi
		sleep 0.2
	done
	for p in "${pids[@]}" "$PID_w"; do
		rlock_wait "$p" 40
		((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS"
	done
	local after
	after=$(awk '$1 == "+" && $2 == "w" { seen = 1; next } seen && $1 == "+" { n++ } END { print n + 0 }' \
		<(sort -k3,3n "$LOG"))
	echo "# writer behind a reader stream: $after of 9 later readers entered after it" >&3
	assert_equal "$(overlaps_with w)" 0
	((after >= 5)) || fail "the writer waited for the stream to end: $(sort -k3,3n "$LOG")"
}

@test "shared: a SIGKILLed waiting writer keeps new readers out for seconds, not its ttl (was: its 60 s ttl)" {
	rlock_bg -s -k wd -- "$HOLD" r
	local reader=$RLOCK_PID
	wait_until 20 test -e r.started
	# a 60 s ttl: before, its writer mark lived that long
	rlock_bg -t 60s -w 100s -k wd -- touch writer-ran
	local writer=$RLOCK_PID
	wait_until 20 key_exists 'rlock:{wd}:writer'
	local pttl
	pttl=$(rcli PTTL 'rlock:{wd}:writer')
	((pttl > 0 && pttl <= 5000)) || fail "the writer mark's lease: ${pttl} ms (ttl 60 s)"
	kill -KILL "$writer"
	local t0 took
	t0=$(now_ms)
	run -0 --separate-stderr rlock -s -w 50s -k wd -- touch reader-ran
	took=$(($(now_ms) - t0))
	echo "# a reader behind a SIGKILLed writer's mark (ttl 60 s): ${took} ms" >&3
	# its mark's lease (5 s) and the reader's next try (at most 5 s) as the margin
	((took < 20000)) || fail "waited ${took} ms behind a dead writer's mark"
	[[ -e reader-ran && ! -e writer-ran ]]
	touch r.release
	rlock_wait "$reader" 20
	assert_equal "$RLOCK_STATUS" 0
}

@test "shared: a live waiting writer's mark outlasts its 5 s lease: readers stay out" {
	rlock_bg -s -k wl -- "$HOLD" r
	local reader=$RLOCK_PID
	wait_until 20 test -e r.started
	rlock_bg -t 60s -w 100s -k wl -- touch writer-ran
	local writer=$RLOCK_PID
	wait_until 20 key_exists 'rlock:{wl}:writer'
	# for 8 s (past the mark's 5 s lease), the waiting writer keeps its mark
	local t0 i
	t0=$(now_ms)
	for ((i = 0; i < 400 && $(($(now_ms) - t0)) < 8000; i++)); do
		key_exists 'rlock:{wl}:writer' || fail "the mark went after $(($(now_ms) - t0)) ms"
		sleep 0.1
	done
	run -75 --separate-stderr rlock -s -n -k wl -- touch late-reader-ran
	[[ ! -e late-reader-ran ]]
	touch r.release
	rlock_wait "$reader" 20
	rlock_wait "$writer" 20
	assert_equal "$RLOCK_STATUS" 0
	[[ -e writer-ran ]]
}

@test "--limit N for N in 1 2 4: max concurrency exactly N under 3N contenders" {
	# A barrier, so that "exactly N" does not depend on the contenders' speed: each
	# holder logs its entry, then stays (at most 30 s) until N holders were inside at
	# once (the "full" mark), then 0.2 s more. N+1 inside at once is still seen.
	local n i pids got report="" bar=$BATS_TEST_TMPDIR/barrier full=$BATS_TEST_TMPDIR/full
	cat >"$bar" <<EOF
#!/bin/sh
# barrier TAG N
echo "+ \$1 \$(date +%s%N)" >>'$LOG'
i=0
while [ ! -e '$full' ] && [ \$i -lt 300 ]; do
	[ "\$(awk '\$1 == "+" { n++ } \$1 == "-" { n-- } END { print n + 0 }' '$LOG')" -ge "\$2" ] &&
		touch '$full'
	i=\$((i + 1))
	sleep 0.1
done
sleep 0.2
echo "- \$1 \$(date +%s%N)" >>'$LOG'
EOF
	chmod +x "$bar"
	for n in 1 2 4; do
		: >"$LOG"
		rm -f "$full"
		pids=()
		for ((i = 0; i < 3 * n; i++)); do
			rlock_bg -l "$n" -k "sem$n" -- "$bar" "p$i" "$n"
			pids+=("$RLOCK_PID")
		done
		for p in "${pids[@]}"; do
			rlock_wait "$p" 60
			((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
		done
		got=$(max_occupancy)
		report+=" N=$n: $got;"
		[[ $got == "$n" ]] || fail "--limit $n: $got inside at once: $(sort -k3,3n "$LOG")"
		assert_equal "$(rcli GET "rlock:{sem$n}:fence")" $((3 * n))
	done
	echo "# --limit, max concurrency under 3N contenders:$report" >&3
}

@test "--limit: holders that disagree on N, or -s against -l: exit 64, one line" {
	rlock_bg -l 2 -k mix -- "$HOLD" a
	wait_until 20 test -e a.started
	run -64 --separate-stderr rlock -l 3 -k mix -- true
	assert_equal "$stderr" "rlock: lock 'mix': acquire: the lock is held with --limit 2, this request asks for --limit 3"
	run -64 --separate-stderr rlock -s -k mix -- true
	assert_output ''
	# an exclusive request waits for the permits (documented mix), -n says busy
	run -75 rlock -n -k mix -- true
	run -0 rlock -l 2 -k mix -- true
	touch a.release
	rlock_wait
	run -64 --separate-stderr rlock -s -l 2 -k mix -- true
	assert_output ''
	assert_equal "$stderr" "rlock: -s and -l do not go together (try 'rlock --help')"
}

@test "--limit: the mode key lost (evicted, deleted) lets no other N in untold: refused from the holders' records, else the holders are told (79)" {
	rlock_bg -l 2 -t 60s -k mk -- "$HOLD" a
	wait_until 20 test -e a.started
	rcli DEL 'rlock:{mk}:limit' >/dev/null
	run -64 --separate-stderr rlock -l 3 -n -k mk -- true
	assert_equal "$stderr" "rlock: lock 'mk': acquire: the lock is held with --limit 2, this request asks for --limit 3"
	# --status says it too (was: "1 of ? permits")
	run -75 --separate-stderr rlock -k mk --status --json
	assert_equal "$(jq -c '[.mode, .limit]' <<<"$output")" '["limit",2]'
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
	# the records lost too: a --limit 3 request gets in, and the --limit 2 holder is told at
	# its next renewal (ttl/3), its count no longer true. The holder is stopped meanwhile:
	# a renewal before the request came (a slow start: 0.5 s with -t 1500ms) wrote its
	# records back, and the request was refused (64)
	rlock_bg -l 2 -t 3s -k mk -- "$HOLD" b
	wait_until 20 test -e b.started
	kill -STOP "$RLOCK_PID"
	rcli DEL 'rlock:{mk}:limit' 'rlock:{mk}:meta' >/dev/null
	run -0 rlock -l 3 -n -t 10s -k mk -- true
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 10
	assert_equal "$RLOCK_STATUS" 79
}

# fair_place_killed NAME H: a holder of NAME (its pid in $holder, its files H.*) and a
# --fair -t 60s waiter queued behind it, SIGKILLed: its place left in the queue.
fair_place_killed() {
	rlock_bg -k "$1" -- "$HOLD" "$2"
	holder=$RLOCK_PID
	wait_until 20 test -e "$2.started"
	rlock_bg --fair -t 60s -k "$1" -- touch fair-ran
	wait_until 20 queue_len "$1" 1
	kill -KILL "$RLOCK_PID"
}

@test "--fair: a place whose lease entry is lost (:qlease evicted or deleted alone) binds neither a plain nor a --fair request (was: the queue's ttl)" {
	local holder
	fair_place_killed qe h
	rcli DEL 'rlock:{qe}:qlease' >/dev/null
	touch h.release
	rlock_wait "$holder" 20
	assert_equal "$RLOCK_STATUS" 0
	run -0 --separate-stderr rlock -n -k qe -- true
	# so too for the fair queue's own requests (acquire_sem.lua), a live place kept
	fair_place_killed qe h2
	rcli DEL 'rlock:{qe}:qlease' >/dev/null
	touch h2.release
	rlock_wait "$holder" 20
	run -0 --separate-stderr rlock --fair -n -k qe -- true
	[[ ! -e fair-ran ]]
	assert_equal "$(rcli EXISTS 'rlock:{qe}:queue')" 0
}

@test "--fair: 8 waiters acquire in their arrival order; only the head is woken" {
	rlock_bg --fair -k q -- "$HOLD" h
	wait_until 20 test -e h.started
	local i pids=()
	for i in 1 2 3 4 5 6 7 8; do
		rlock_bg --fair -k q -- sh -c "echo $i >>order"
		pids+=("$RLOCK_PID")
		wait_until 20 queue_len q "$i"
	done
	run -75 rlock -k q --status
	assert_line --index 0 'rlock:{q} is held'
	assert_line 'queue    8 waiting (--fair)'
	rcli CONFIG RESETSTAT >/dev/null
	touch h.release
	for p in "${pids[@]}"; do
		rlock_wait "$p" 30
		((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS"
	done
	assert_equal "$(tr '\n' ' ' <order)" "1 2 3 4 5 6 7 8 "
	local evals
	evals=$(rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_evalsha" { print $3 }')
	echo "# --fair: order $(tr '\n' ' ' <order)(0 violations); $evals script calls for 8 hand-offs" >&3
}

@test "--fair: a SIGKILLed waiter in the middle stalls the rest no longer than its queue lease" {
	rlock_bg --fair -k qk -- "$HOLD" h
	wait_until 20 test -e h.started
	local i pids=() victim
	for i in 1 2 3 4 5 6; do
		rlock_bg --fair -t 2s -k qk -- sh -c "echo $i \$(date +%s%3N) >>order"
		pids+=("$RLOCK_PID")
		((i == 3)) && victim=$RLOCK_PID
		wait_until 20 queue_len qk "$i"
	done
	kill -KILL "$victim"
	touch h.release
	for p in "${pids[@]}"; do
		[[ $p == "$victim" ]] && continue
		rlock_wait "$p" 30
		((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS"
	done
	assert_equal "$(cut -d' ' -f1 order | tr '\n' ' ')" "1 2 4 5 6 "
	local gap
	gap=$(awk '$1 == 2 { a = $2 } $1 == 4 { b = $2 } END { print b - a }' order)
	echo "# --fair: SIGKILLed waiter #3 (queue lease 2 s) stalled the queue $gap ms" >&3
	# the bound: its lease (2 s) plus the next waiter's refresh (ttl/3) as the margin
	((gap < 2000 + 2000)) || fail "stalled $gap ms, beyond the 2 s queue lease (+ its refresh)"
}

# qlease_over NAME: no place in NAME's fair queue has a lease left (the server's clock).
qlease_over() {
	local t
	t=$(rcli TIME | head -1)
	[[ $(rcli ZCOUNT "rlock:{$1}:qlease" "($((t * 1000))" +inf) == 0 ]]
}

@test "--fair: a SIGKILLed waiter's place binds no plain exclusive or --supersede request past its queue lease (was: the queue's ttl, 60 s)" {
	local holder
	# a 60 s ttl: the queue's keys live that long; its place, a 5 s lease
	fair_place_killed qd h
	touch h.release
	rlock_wait "$holder" 20
	assert_equal "$RLOCK_STATUS" 0
	# a plain waiter already waiting: it gets the free lock once the place's lease ends
	local t0
	t0=$(now_ms)
	rlock_bg -w 50s -k qd -- touch plain-ran
	local waiter=$RLOCK_PID
	wait_until 20 qlease_over qd
	run -0 --separate-stderr rlock -n -k qd -- true
	run -0 --separate-stderr rlock --supersede -w 10s -k qd -- true
	rlock_wait "$waiter" 40
	assert_equal "$RLOCK_STATUS" 0
	local took=$(($(now_ms) - t0))
	echo "# a plain waiter behind a dead --fair place (lease 5 s, queue ttl 60 s): $took ms" >&3
	((took < 20000)) || fail "waited $took ms for a free lock behind a dead waiter's place"
	[[ ! -e fair-ran ]]
	assert_equal "$(rcli EXISTS 'rlock:{qd}:queue')" 0
}

@test "--fair: a waiter that gives up (-w) leaves the queue at once; -n never queues" {
	rlock_bg --fair -k ql -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 20 test -e h.started
	run -75 rlock --fair -n -k ql -- true
	assert_equal "$(rcli EXISTS 'rlock:{ql}:queue')" 0
	# a 60 s lease on its place: only leaving can empty the queue this soon
	rlock_bg --fair -t 60s -w 1s -k ql -- true
	wait_until 20 queue_len ql 1
	rlock_wait "$RLOCK_PID" 20
	assert_equal "$RLOCK_STATUS" 75
	assert_equal "$(rcli EXISTS 'rlock:{ql}:queue' 'rlock:{ql}:qlease')" 0
	touch h.release
	rlock_wait "$holder" 20
	assert_equal "$RLOCK_STATUS" 0
}

@test "--limit: SIGKILL of a holder frees its permit within one lease" {
	rlock_bg -l 2 -t 2s -k dead -- "$HOLD" a
	local victim=$RLOCK_PID
	wait_until 20 test -e a.started
	rlock_bg -l 2 -t 2s -k dead -- "$HOLD" b
	wait_until 20 test -e b.started
	local t0
	rlock_bg -l 2 -t 2s -k dead -- "$HOLD" c
	local waiter=$RLOCK_PID
	kill -KILL "$victim"
	t0=$(now_ms)
	wait_until 10 test -e c.started
	local took=$(($(now_ms) - t0))
	echo "# --limit 2: the SIGKILLed holder's permit went to a waiter after $took ms (lease 2000 ms)" >&3
	# free when the lease ends (server clock); the waiter sees it at its next try
	# (every ttl/3 at most): the lease again as the margin
	((took < 2 * 2000)) || fail "the permit stayed taken $took ms"
	touch b.release c.release
	rlock_wait "$waiter" 20
	assert_equal "$RLOCK_STATUS" 0
}

@test "modes: --status/--list/--break show every holder; re-entry; --min-hold" {
	rlock_bg -s -k st -- "$HOLD" a
	local a=$RLOCK_PID
	wait_until 20 test -e a.started
	rlock_bg -s -k st -- sh -c '"$RLOCK" -s -k st -- "$0" b' "$HOLD"
	local b=$RLOCK_PID
	wait_until 20 test -e b.started # re-entered: its own permit's token is live
	run -75 rlock -k st --status
	assert_line --index 0 'rlock:{st} is held by 2 shared holders'
	run -75 rlock -k st --status --json
	assert_equal "$(jq -c '[.holder_count, .mode, (.holders | length)]' <<<"$output")" '[2,"shared",2]'
	run -0 rlock --list
	assert_equal "$(grep -c '\[shared\]' <<<"$output")" 2
	run -0 --separate-stderr rlock -k st --break
	assert_equal "$(grep -c '^rlock: broke rlock:{st}' <<<"$stderr")" 2
	run -0 rlock -k st --status
	touch a.release b.release
	rlock_wait "$a" 20 # broken: whatever they report, they must be gone
	rlock_wait "$b" 20
	# --min-hold on a permit: kept after the command (a long one: slow passes), shown,
	# counted, then broken so that the keys go
	run -0 rlock -l 3 -k mh --min-hold 60s -- true
	run -75 rlock -k mh --status
	assert_line 'holder 1 (kept by --min-hold)'
	run -0 rlock -l 3 -k mh -n -- true # a kept permit is one of the 3
	run -64 rlock -l 2 -k mh -- true
	run -0 rlock -k mh --break
}

@test "shared holders and permits kept by --min-hold: a request they keep out says so, and an exclusive waiter gets in as the keep ends" {
	# the busy reply names the holder whose lease ends last, kept, and for how long (was:
	# "held by HOST pid N" alone, and no lease end, so the waiter polled on its backoff)
	run -0 rlock -s -k kp --min-hold 60s -- true
	run -75 --separate-stderr rlock -k kp -n -- true
	[[ $stderr == *'its command has ended (kept by --min-hold for '*' more)'* ]] || fail "$stderr"
	run -75 --separate-stderr rlock -k kp --fair -n -- true
	[[ $stderr == *'(kept by --min-hold for '* ]] || fail "$stderr"
	run -0 rlock -k kp --break
	run -0 rlock -l 1 -k kp --min-hold 60s -- true
	run -75 --separate-stderr rlock -l 1 -k kp -n -- true
	[[ $stderr == *'(kept by --min-hold for '* ]] || fail "$stderr"
	run -75 --separate-stderr rlock -k kp -n -- true
	[[ $stderr == *'(kept by --min-hold for '* ]] || fail "$stderr"
	run -0 rlock -k kp --break
	# an exclusive waiter behind a shared keep takes the lock when it ends: never before,
	# and without a backoff step's delay after it (printed, bounded by a second)
	local t0 took
	t0=$(now_ms)
	run -0 rlock -s -k kw --min-hold 2s -- true
	run -0 --separate-stderr rlock -k kw -w 20s -- true
	took=$(($(now_ms) - t0))
	echo "# exclusive after a 2000 ms shared keep: ${took} ms" >&3
	((took >= 2000)) || fail "in after ${took} ms, inside the keep"
	((took < 3000)) || fail "in after ${took} ms: not woken at the keep's end"
}

@test "lost-update checker: exclusive, --limit 1 and --fair" {
	local mode out
	for mode in "" "-l 1" "--fair"; do
		# shellcheck disable=SC2086
		out=$("$RLOCK_SOURCE_DIR/scripts/lost-update-check" --rlock "$RLOCK" -p 4 -i 5 \
			-k "lu${mode// /}" -d "$BATS_TEST_TMPDIR/lu${mode// /}" -- $mode) ||
			fail "checker failed in mode '$mode': $out"
		echo "# lost-update ${mode:-exclusive}: $out" >&3
		[[ $out == *'count=20 expected=20 overlaps=0 errors=0 fences=ok'* ]]
	done
}

@test "Redis commands per acquisition, 2 and 32 contenders, each mode" {
	local m p line=""
	for m in "-x" "-s" "-l 2" "--fair"; do
		for p in 2 32; do
			# shellcheck disable=SC2086
			line+=" ${m} P=$p: $(commands_per_acquisition "$p" $m -k "cmd${m// /}$p");"
		done
	done
	echo "# commands per acquisition:$line" >&3
}

# renewals FILE: the renewals a -vv run logged in FILE so far. full_renewed FILE N PID:
# N of them, or the run (PID) is over (lost: the test then says so).
renewals() { grep -c '^rlock: renewed ' "$1" || true; }
full_renewed() { (($(renewals "$1") >= $2)) || ! proc_alive "$3"; }

@test "a full server (maxmemory reached under noeviction): shared and --limit holders are still renewed, as an exclusive one is; none is lost" {
	# A full server refuses a script's first write when it needs memory (OOM), not
	# the writes after one that did not (PEXPIRE). The exclusive renewal writes
	# PEXPIRE first; a shared holder's or permit's wrote ZADD first: lost (79) within
	# its ttl on a server that can still renew it.
	local m n
	for m in -x -s "-l 2"; do
		rm -f go held
		# shellcheck disable=SC2086
		rlock_bg -vv -t 1500ms $m -k "full${m// /}" -- sh -c 'touch held; until [ -e go ]; do sleep 0.05; done'
		wait_until 10 test -e held
		n=$(renewals "$RLOCK_ERR")
		rcli CONFIG SET maxmemory 1 >/dev/null
		wait_until 20 full_renewed "$RLOCK_ERR" $((n + 3)) "$RLOCK_PID"
		rcli CONFIG SET maxmemory 0 >/dev/null
		touch go
		rlock_wait "$RLOCK_PID" 20
		((RLOCK_STATUS == 0)) || fail "$m: exit $RLOCK_STATUS: $(grep -v 'renewed' "$RLOCK_ERR")"
	done
}

# fair_places NAME N: N --fair places in NAME's queue whose leases last a minute, their
# waiters (pids 4001...) away: the lock free, the queue binds (as in the moment between
# a release and its woken head's acquire, or behind a head that is stopped).
fair_places() {
	local name=$1 n=$2 i t now
	t=$(rcli TIME | head -1)
	now=$((t * 1000))
	for ((i = 1; i <= n; i++)); do
		rcli ZADD "rlock:{$name}:queue" $(((now + i) * 1000)) "tok$i" >/dev/null
		rcli ZADD "rlock:{$name}:qlease" $((now + 60000)) "tok$i" >/dev/null
		rcli HSET "rlock:{$name}:qmeta" "tok$i" "{\"host\":\"h$i\",\"pid\":$((4000 + i))}" >/dev/null
	done
	rcli PEXPIRE "rlock:{$name}:queue" 60000 >/dev/null
}

@test "--fair: a plain request that only the fair queue keeps out says so (busy line, -v, --status), never 'held by ? pid ?'" {
	fair_places qf 2
	run -75 --separate-stderr rlock -n -k qf -- true
	[[ $stderr == "rlock: lock 'qf' is busy: 2 --fair waiters go first" ]] || fail "$stderr"
	run -75 --separate-stderr rlock -v -w 300ms -k qf -- true
	[[ $stderr == *"lock 'qf' is busy (2 --fair waiters go first); waiting"* ]] || fail "$stderr"
	[[ $stderr != *"? pid ?"* ]] || fail "$stderr"
	# so too shared and --limit requests, and a --fair one (the waiters ahead of it)
	local mode
	for mode in -s "-l 2" --fair; do
		# shellcheck disable=SC2086 # the mode's words
		run -75 --separate-stderr rlock -n $mode -k qf -- true
		[[ $stderr == "rlock: lock 'qf' is busy: 2 --fair waiters go first" ]] || fail "$mode: $stderr"
	done
	run -75 --separate-stderr rlock -v -w 300ms --fair -k qf -- true
	[[ $stderr == *"lock 'qf' is busy (2 --fair waiters go first); waiting"* ]] || fail "$stderr"
	run -75 --separate-stderr rlock -k qf --status
	[[ ${lines[0]} == "rlock:{qf} is free, but 2 --fair waiters go first: a new request waits its turn (last fence 0)" ]] ||
		fail "$output"
	run -75 --separate-stderr rlock -k qf --status --json
	jq -e '.held == false and .blocked.by == "fair-queue" and .blocked.waiters == 2' \
		<<<"$output" >/dev/null || fail "$output"
	rcli DEL 'rlock:{qf}:queue' 'rlock:{qf}:qlease' 'rlock:{qf}:qmeta' 'rlock:{qf}:writer' >/dev/null
	run -0 --separate-stderr rlock -k qf --status
	run -0 --separate-stderr rlock -n -k qf -- true
}

@test "--fair: --list lists a free name that only the fair queue keeps out, as --status says it (text and JSON); once" {
	fair_places qf 2
	run -75 --separate-stderr rlock -k qf -n -- true
	run -0 --separate-stderr rlock --list
	assert_line --regexp '^qf +- +- +- +- +\[free, but 2 --fair waiters go first: a new request waits its turn\]$'
	[[ $(grep -c '^qf ' <<<"$output") == 1 ]] || fail "$output"
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "qf") | [.held, .blocked.by, .blocked.waiters]]' <<<"$output")" '[[false,"fair-queue",2]]'
	# the places' leases ended (their waiters are gone): the queue binds nobody, unlisted
	local i
	for i in 1 2; do rcli ZADD 'rlock:{qf}:qlease' 1 "tok$i" >/dev/null; done
	run -0 --separate-stderr rlock -k qf --status
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "qf")]' <<<"$output")" '[]'
	rcli DEL 'rlock:{qf}:queue' 'rlock:{qf}:qlease' 'rlock:{qf}:qmeta' >/dev/null
}

@test "shared: a request that only a waiting writer's mark keeps out (the lock free) says so (busy line, -v), never 'held by ? pid ?'" {
	# a waiting exclusive request's mark (a writer SIGKILLed or stopped while it waited,
	# or a moment before its turn): new shared holders and permits queue behind it
	rcli SET 'rlock:{wm}:writer' tokw PX 60000 >/dev/null
	local mode
	for mode in -s "-l 2"; do
		# shellcheck disable=SC2086 # the mode's words
		run -75 --separate-stderr rlock -n $mode -k wm -- true
		[[ $stderr == "rlock: lock 'wm' is busy: an exclusive request waits, it goes first" ]] ||
			fail "$mode: $stderr"
		# shellcheck disable=SC2086
		run -75 --separate-stderr rlock -v -w 300ms $mode -k wm -- true
		[[ $stderr == *"lock 'wm' is busy (an exclusive request waits, it goes first); waiting"* ]] ||
			fail "$mode: $stderr"
		[[ $stderr != *"? pid ?"* ]] || fail "$mode: $stderr"
	done
	# an exclusive request is not kept out: --status says free (and names the mark)
	run -0 --separate-stderr rlock -k wm --status
	assert_line 'an exclusive request is waiting: new shared holders queue behind it'
	rcli DEL 'rlock:{wm}:writer' >/dev/null
	run -0 --separate-stderr rlock -n -s -k wm -- true
}
