#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the shells the tests start; bats sets $stderr
# --events FILE (issue 24): one JSON object per line, appended with one write each, for
# waiting, acquired, busy, renew-failed, warned, lost, released and the keeper's events;
# every line has the time (RFC 3339, UTC, ms), the name and key, host, pid, the token's
# first 8 characters and the label. A file that cannot be written never stops the job.

bats_require_minimum_version 1.5.0
load helpers

setup() {
	common_setup
	require_tool jq
}

# events FILE: the event names of FILE, one per line, after checking that every line
# is a JSON object with the fields every event has.
events() {
	jq -e -r 'select((.schema == 1) and (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"))
		and (.name | type == "string") and (.key | type == "string") and (.host | type == "string")
		and (.time_ms | type == "number") and ((.time_ms / 1000 | floor | todate) == (.time | sub("\\.[0-9]{3}Z$"; "Z")))
		and (.pid | type == "number") and has("token") and has("label")) | .event' "$1" ||
		fail "$1 is not one JSON object with every field per line: $(cat "$1")"
	# every line was a good one: as many names as lines
	[[ $(jq -r .event "$1" | wc -l) == $(wc -l <"$1") ]] || fail "$1: a line is not JSON"
}

# event FILE NAME: the (last) line of event NAME.
event() { jq -c --arg e "$2" 'select(.event == $e)' "$1" | tail -n 1; }

@test "events: a frozen server reads acquired, renew-failed, lost, released in order; every line is JSON" {
	# io-timeout 500ms: the first renewal (ttl/3 = 2 s) fails long before the loss at
	# ttl x 4/5 = 4.8 s; --warn's signal comes at ttl x 2/3 = 4 s, before the loss.
	rlock_bg -k ev -t 6s --io-timeout 500ms --warn USR1 --events ev.jsonl \
		--label 'nightly "db" \ backup' \
		-c 'trap "" USR1; trap "exit 0" TERM; touch started; while :; do sleep 0.05; done'
	wait_until 10 test -e started
	kill -STOP "$REDIS_PID"
	rlock_wait "$RLOCK_PID" 60
	kill -CONT "$REDIS_PID"
	((RLOCK_STATUS == 79)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	run -0 events ev.jsonl
	echo "# $(tr '\n' ' ' <<<"$output")" >&3
	[[ $(grep -E '^(acquired|renew-failed|lost|released)$' <<<"$output" | uniq | tr '\n' ' ') == \
		"acquired renew-failed lost released " ]] || fail "order: $output"
	[[ $(grep -c renew-failed <<<"$output") == 1 ]] # one line per outage, not per retry
	[[ $(grep -E '^(warned|lost)$' <<<"$output" | tr '\n' ' ') == "warned lost " ]] ||
		fail "warned, then lost: $output"
	run -0 jq -r 'select(.event == "lost") | .reason' ev.jsonl
	[[ $output == *"no renewal confirmed in time"* ]]
	run -0 jq -r 'select(.event == "released") | "\(.status) \(.hold_ms)"' ev.jsonl
	[[ $output == "79 "* ]]
	# the label round-trips through JSON; the token is its first 8 characters only
	run -0 jq -r -s 'map(.label) | unique | .[]' ev.jsonl
	[[ $output == 'nightly "db" \ backup' ]]
	run -0 jq -r -s 'map(.token | length) | unique | .[]' ev.jsonl
	[[ $output == 8 ]]
	[[ $(jq -r -s 'map(.pid) | unique | .[]' ev.jsonl) == "$RLOCK_PID" ]]
	[[ $(jq -r -s 'map(.name + " " + .key) | unique | .[]' ev.jsonl) == 'ev rlock:{ev}' ]]
}

@test "events: a renewal that fails only as the lease ends never writes renew-failed after lost (--on-lost ignore; four runs)" {
	# -t 1s and the default --io-timeout (2s): a renewal sent into the frozen server is
	# capped by the lease's end, the moment the main thread says lost; without the order
	# most runs wrote renew-failed after lost
	local i pids=()
	for i in 1 2 3 4; do
		rlock_bg -k "o$i" -t 1s --on-lost ignore --events "o$i.jsonl" \
			-c "touch o$i.started; sleep 2"
		pids+=("$RLOCK_PID")
	done
	for i in 1 2 3 4; do wait_until 10 test -e "o$i.started"; done
	kill -STOP "$REDIS_PID"
	for i in 1 2 3 4; do
		wait_until 10 grep -q '"lost"' "o$i.jsonl" || { kill -CONT "$REDIS_PID"; fail "o$i: no lost line"; }
	done
	kill -CONT "$REDIS_PID"
	for i in "${pids[@]}"; do rlock_wait "$i" 20; done
	for i in 1 2 3 4; do
		run -0 events "o$i.jsonl"
		[[ $(grep -E '^(acquired|renew-failed|lost|released)$' <<<"$output" | tr '\n' ' ') == \
			@("acquired renew-failed lost released "|"acquired lost released ") ]] ||
			fail "o$i: order: $(tr '\n' ' ' <<<"$output")"
	done
}

@test "events: busy with -n (exit 75), and the holder's acquired/released with its status" {
	rlock_bg -k ev --events ev.jsonl -- "$HOLD" h 3
	wait_until 10 test -e h.started
	run -75 "$RLOCK" -n -k ev --events ev.jsonl -- true
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 3))
	run -0 events ev.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired busy released " ]] || fail "$output"
	run -0 event ev.jsonl busy
	[[ $(jq -r '.wait_ms | type' <<<"$output") == number ]]
	[[ $(jq -r '.pid' <<<"$output") != "$RLOCK_PID" ]]
	run -0 event ev.jsonl released
	[[ $(jq -r .status <<<"$output") == 3 ]]
	[[ $(jq -r .pid <<<"$output") == "$RLOCK_PID" ]]
	(($(jq -r .hold_ms <<<"$output") >= 0))
	run -0 event ev.jsonl acquired
	[[ $(jq -r '.fence' <<<"$output") == "$(rcli GET 'rlock:{ev}:fence')" ]]
	[[ $(jq -r '.token' <<<"$output") == "$(env_of h RLOCK_TOKEN | cut -c1-8)" ]]
}

@test "events: a waiter says waiting, then acquired with the time it waited" {
	rlock_bg -k ev -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID
	rlock_bg -k ev --events ev.jsonl -- true
	wait_until 30 grep -q '"event":"waiting"' ev.jsonl
	touch h.release
	rlock_wait "$holder"
	rlock_wait
	((RLOCK_STATUS == 0))
	run -0 events ev.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "waiting acquired released " ]] || fail "$output"
	# it waited at least from its waiting line to its acquired line
	run -0 jq -r -s '(map(select(.event == "acquired"))[0]) as $a
		| (map(select(.event == "waiting"))[0]) as $w | [$a.wait_ms, $a.time_ms - $w.time_ms] | @tsv' ev.jsonl
	read -r waited between <<<"$output"
	echo "# wait_ms $waited, waiting -> acquired $between ms" >&3
	((waited > 0 && waited + 2 >= between)) || fail "wait_ms $waited, lines $between ms apart"
}

@test "events: the keeper's events (--acquire, --release; a relative path)" {
	run -0 --separate-stderr "$RLOCK" -k kp --acquire --events ev.jsonl
	eval "$output"
	[[ -n $RLOCK_TOKEN ]]
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	local keeper
	keeper=$(jq -r 'select(.event == "keeper-started") | .pid' ev.jsonl)
	track_pid "$keeper"
	run -0 "$RLOCK" -k kp --release --token "$RLOCK_TOKEN"
	wait_until 20 proc_gone "$keeper"
	run -0 events ev.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired keeper-started keeper-stopped " ]] || fail "$output"
	[[ $(jq -r -s 'map(.token) | unique | .[]' ev.jsonl) == "${RLOCK_TOKEN:0:8}" ]]
	# a keeper told to release (SIGTERM) says so, with its status
	run -0 --separate-stderr "$RLOCK" -k kp2 --acquire --events ev2.jsonl
	wait_until 10 grep -q '"event":"keeper-started"' ev2.jsonl
	keeper=$(jq -r 'select(.event == "keeper-started") | .pid' ev2.jsonl)
	track_pid "$keeper"
	kill -TERM "$keeper"
	wait_until 20 proc_gone "$keeper"
	run -0 events ev2.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired keeper-started keeper-released " ]] || fail "$output"
	[[ $(jq -r 'select(.event == "keeper-released") | .status' ev2.jsonl) == 0 ]]
}

@test "events: a keeper that finds its lock broken says keeper-lost, with the reason" {
	run -0 --separate-stderr "$RLOCK" -k kl -t 1s --acquire --events ev.jsonl
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	local keeper
	keeper=$(jq -r 'select(.event == "keeper-started") | .pid' ev.jsonl)
	track_pid "$keeper"
	run -0 "$RLOCK" -k kl --break
	wait_until 20 proc_gone "$keeper"
	run -0 events ev.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired keeper-started keeper-lost " ]] || fail "$output"
	[[ $(jq -r 'select(.event == "keeper-lost") | .reason' ev.jsonl) == *"no longer ours"* ]]
}

@test "events: a file that cannot be written warns once and the job runs" {
	run -0 --separate-stderr "$RLOCK" -k ev --events "$BATS_TEST_TMPDIR/no/such/dir/ev" -- echo ran
	[[ $output == ran ]]
	[[ $(grep -c 'events file' <<<"$stderr") == 1 ]] || fail "stderr: $stderr"
	# open works, every write fails (ENOSPC): still one warning for several events
	run -0 --separate-stderr "$RLOCK" -k ev --events /dev/full -- echo ran
	[[ $output == ran ]]
	[[ $(grep -c 'events file' <<<"$stderr") == 1 ]] || fail "stderr: $stderr"
	[[ $stderr == *"/dev/full"* ]]
}

@test "events, metrics: a sink past the caller's file size limit (ulimit -f) fails with one line, never kills rlock: the command runs with SIGXFSZ as given, the lock is released" {
	# RLIMIT_FSIZE: a write past it raises SIGXFSZ, whose default kills; rlock died of it
	# (153) with the lock held for its TTL, before its command ran
	head -c 5000 /dev/zero >big.jsonl
	run -0 --separate-stderr bash -c 'ulimit -f 4; exec "$0" -k fs --events big.jsonl -- sh -c "echo ran; grep -e SigBlk -e SigIgn /proc/self/status"' "$RLOCK"
	[[ ${lines[0]} == ran ]] || fail "output: $output; stderr: $stderr"
	# the command gets SIGXFSZ as given: neither blocked nor ignored (bit 25 clear)
	(((0x${lines[1]##*[[:space:]]} >> 24 & 1) == 0)) || fail "SIGXFSZ blocked in the command: ${lines[1]}"
	(((0x${lines[2]##*[[:space:]]} >> 24 & 1) == 0)) || fail "SIGXFSZ ignored in the command: ${lines[2]}"
	[[ $stderr == "rlock: cannot write the events file '"*"/big.jsonl' (File too large): the job goes on without it" ]] ||
		fail "stderr: $stderr"
	assert_equal "$(rcli EXISTS 'rlock:{fs}')" 0
	# a metrics file of 1.5 kB against 1 kB (bats keeps stderr in a file: it needs room)
	run -0 --separate-stderr bash -c 'ulimit -f 1; exec "$0" -k fs --metrics-file m.prom -- echo ran' "$RLOCK"
	assert_equal "$output" ran
	[[ $stderr == "rlock: cannot write the metrics file '"*"m.prom' (write: File too large): the job goes on without it" ]] ||
		fail "stderr: $stderr"
	assert_equal "$(rcli EXISTS 'rlock:{fs}')" 0
}

# blpops N: true when N clients wait in BLPOP (a waiter waits for its wake-up).
blpops() { [[ $(rcli CLIENT LIST | grep -c 'cmd=blpop') == "$1" ]]; }

# full_stderr_on_7: fd 7 open on a FIFO that a process holds open and never reads,
# its buffer full: a stderr that takes no line (2>&7).
full_stderr_on_7() {
	mkfifo full
	# shellcheck disable=SC2217
	sleep 60 <full &
	track_pid $!
	exec 7>full
	# full, then blocking again (the flag is the pipe's, shared with rlock's stderr)
	perl -e 'use Fcntl; fcntl(STDOUT, F_SETFL, O_NONBLOCK); 1 while syswrite(STDOUT, "x" x 4096); fcntl(STDOUT, F_SETFL, 0)' >&7
}

@test "events: --events - into a full stderr (a pipe nobody reads) holds up neither the command nor the release; a SIGTERM ends the wait for stderr" {
	# The acquired line was written with a plain blocking write, before the command:
	# rlock hung holding the lock, its command not started, deaf to SIGTERM
	full_stderr_on_7
	"$RLOCK" -k fullerr --events - -- touch ran 2>&7 &
	local pid=$!
	track_pid "$pid"
	exec 7>&-
	wait_until 10 test -e ran
	wait_until 10 key_absent 'rlock:{fullerr}'
	# released; its lines wait for stderr, until a terminating signal
	proc_alive "$pid" || fail "rlock did not wait for stderr"
	kill -TERM "$pid"
	rlock_wait "$pid" 10
	assert_equal "$RLOCK_STATUS" 143
}

@test "events: a waiter whose stderr is full (--events -: its waiting line waits) still waits, takes the lock when it is free, and a SIGTERM while it waits ends it at once (143)" {
	# it blocked in the write of its waiting line: deaf to SIGTERM (signals are read
	# from a signalfd), never taking the lock; -v's first lines, before it even asked
	start_holder fw
	full_stderr_on_7
	"$RLOCK" -k fw -w 30 --events - -- touch a.ran 2>&7 &
	local a=$!
	track_pid "$a"
	wait_until 10 blpops 1
	kill -TERM "$a"
	rlock_wait "$a" 10
	assert_equal "$RLOCK_STATUS" 143
	"$RLOCK" -v -k fw -w 30 --events - -- touch b.ran 2>&7 &
	local b=$!
	track_pid "$b"
	exec 7>&-
	wait_until 10 blpops 1
	touch fw.release
	rlock_wait "$HOLDER_PID" 10
	wait_until 10 test -e b.ran
	[[ ! -e a.ran ]]
	# done, its lines wait for stderr until a terminating signal
	kill -TERM "$b"
	rlock_wait "$b" 10
	assert_equal "$RLOCK_STATUS" 143
}

@test "events: a line cut short by a full disk is not glued to the next run's first line" {
	((EUID == 0)) || skip "needs root (a small tmpfs of its own mount namespace)"
	require_tool unshare
	mkdir -p small
	# Two pages: the events file fills the first but for a few bytes, a filler the
	# second; the first run's acquired line is cut short (a short write), its released
	# line not written at all (ENOSPC); the filler goes, a second run writes its lines.
	# shellcheck disable=SC2016  # for the inner shell
	run -0 unshare -m sh -c 'mount -t tmpfs -o size=8k none small || exit 9
		printf "{\"pad\":\"%04070d\"}\n" 0 >small/ev.jsonl
		head -c 4096 /dev/zero >small/fill
		"$1" -k ev --events small/ev.jsonl -- true 2>first.err || exit 10
		rm small/fill
		"$1" -k ev --events small/ev.jsonl -- true || exit 11
		cp small/ev.jsonl ev.jsonl' sh "$RLOCK"
	grep -q 'events file' first.err || fail "the disk was not full: $(cat first.err)"
	# the line cut short stays as it is; every whole line around it reads
	[[ $(jq -cR 'fromjson? | .event // "pad"' ev.jsonl | tr '\n' ' ') == '"pad" "acquired" "released" ' ]] ||
		fail "the second run's lines do not all read: $(tail -c 700 ev.jsonl)"
}

@test "events: from the config file (events = FILE), - for stderr; an empty path is a usage error" {
	printf 'events = %s\n' "$BATS_TEST_TMPDIR/conf.jsonl" >conf
	run -0 "$RLOCK" --config conf -k ev -- true
	run -0 events conf.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired released " ]]
	run -0 --separate-stderr "$RLOCK" -k ev --events - -- true
	grep '^{' <<<"$stderr" >stderr.jsonl
	run -0 events stderr.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired released " ]]
	run -64 --separate-stderr "$RLOCK" -k ev --events '' -- true
	assert_one_line_error
}

@test "events: unavailable (a dead port) is an event with the status and the reason" {
	run -69 "$RLOCK" -n -u "redis://127.0.0.1:$(dead_port)" -k ev --events ev.jsonl -- true
	run -0 events ev.jsonl
	[[ $output == unavailable ]]
	[[ $(jq -r '"\(.status) \(.token)"' ev.jsonl) == "69 null" ]]
	[[ -n $(jq -r .reason ev.jsonl) ]]
}

@test "events: a link planted at the file's name, a directory: refused with the one warning, nothing written through it (issue 33)" {
	echo 'precious' >victim
	ln -s "$PWD/victim" ev.jsonl
	run -0 --separate-stderr "$RLOCK" -k ev --events "$PWD/ev.jsonl" -- echo ran
	[[ $output == ran ]]
	[[ $(grep -c 'events file' <<<"$stderr") == 1 ]] || fail "stderr: $stderr"
	[[ $stderr == *"symbolic link"* ]] || fail "stderr: $stderr"
	[[ $(cat victim) == precious ]]
	mkdir evdir
	run -0 --separate-stderr "$RLOCK" -k ev --events "$PWD/evdir" -- echo ran
	[[ $stderr == *"s a directory"* ]] || fail "stderr: $stderr"
}

@test "events: every way of not getting the lock ends with a line and the exit status (superseded 80, a usage mismatch 64, killed while waiting 143)" {
	rlock_bg -k ev -s -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID
	# held shared, asked with --limit: 64, found at the server
	run -64 "$RLOCK" -n -k ev --limit 2 --events ev.jsonl -- true
	[[ $(jq -c -s 'map([.event, .status])' ev.jsonl) == '[["failed",64]]' ]] ||
		fail "$(cat ev.jsonl)"
	# Redlock nodes that are one server (another name for it): 64 at the connect
	local other="redis://localhost:$REDIS_PORT"
	if [[ -n $REDIS_SOCKET ]]; then
		ln -s "$REDIS_SOCKET" alias.sock
		other="unix://$PWD/alias.sock"
	fi
	run -64 "$RLOCK" -n -u "$REDIS_URL" -u "$other" -k ev --events one.jsonl --metrics-file m.prom -- true
	[[ $(jq -c -s 'map([.event, .status])' one.jsonl) == '[["failed",64]]' ]] ||
		fail "$(cat one.jsonl)"
	# the metrics end the run too, as before failed existed: unavailable, 64
	grep -q '^rlock_outcome{key="ev",outcome="unavailable"} 1' m.prom || fail "$(cat m.prom)"
	grep -q '^rlock_exit_code{key="ev"} 64' m.prom || fail "$(cat m.prom)"
	# a waiter superseded by a newer --supersede request: 80
	rlock_bg -k ev --supersede --events sup.jsonl -- true
	local old=$RLOCK_PID
	wait_until 10 grep -q '"event":"waiting"' sup.jsonl
	rlock_bg -k ev --supersede -w 100ms -- true
	rlock_wait "$old"
	((RLOCK_STATUS == 80)) || fail "status $RLOCK_STATUS"
	[[ $(jq -c -s 'map([.event, .status])' sup.jsonl) == '[["waiting",null],["superseded",80]]' ]] ||
		fail "$(cat sup.jsonl)"
	[[ $(jq -r -s 'map(.token) | unique | length' sup.jsonl) == 1 ]]
	# a waiter killed by SIGTERM dies of it, its last line says so
	rlock_bg -k ev --events sig.jsonl -- true
	wait_until 10 grep -q '"event":"waiting"' sig.jsonl
	kill -TERM "$RLOCK_PID"
	rlock_wait
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS"
	[[ $(jq -c -s 'map([.event, .status])' sig.jsonl) == '[["waiting",null],["failed",143]]' ]] ||
		fail "$(cat sig.jsonl)"
	[[ $(jq -r 'select(.event == "failed") | .reason' sig.jsonl) == *SIGTERM* ]]
	touch h.release
	rlock_wait "$holder"
}

@test "events: --release --events ends the keeper's run: keeper-released, or keeper-lost with 79" {
	run -0 --separate-stderr "$RLOCK" -k kp --acquire --events ev.jsonl
	eval "$output"
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	track_pid "$(jq -r 'select(.event == "keeper-started") | .pid' ev.jsonl)"
	run -0 "$RLOCK" -k kp --release --events ev.jsonl
	[[ $(jq -r .event ev.jsonl | tr '\n' ' ') == "acquired keeper-started keeper-stopped keeper-released " ]] ||
		fail "$(cat ev.jsonl)"
	[[ $(jq -r -s 'map(.token) | unique | .[]' ev.jsonl) == "${RLOCK_TOKEN:0:8}" ]]
	# deleted under the keeper (its renewal not due yet): the release finds it gone
	run -0 --separate-stderr "$RLOCK" -k kq -t 30s --acquire --events ev2.jsonl
	eval "$output"
	wait_until 10 grep -q '"event":"keeper-started"' ev2.jsonl
	track_pid "$(jq -r 'select(.event == "keeper-started") | .pid' ev2.jsonl)"
	rcli DEL 'rlock:{kq}' >/dev/null
	run -79 "$RLOCK" -k kq --release --events ev2.jsonl
	[[ $(jq -r .event ev2.jsonl | tail -n 1) == keeper-lost ]] || fail "$(cat ev2.jsonl)"
}

@test "events: a run preempted (81) reads preempted, not lost, then released; the metrics say ran" {
	rlock_bg -k pe -t 1s --preemptible --events ev.jsonl --metrics-file m.prom -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID
	run -0 "$RLOCK" -k pe --preempt -w 10s -- true
	rlock_wait "$holder"
	((RLOCK_STATUS == 81)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	run -0 events ev.jsonl
	[[ $(tr '\n' ' ' <<<"$output") == "acquired preempted released " ]] || fail "$output"
	[[ $(jq -r 'select(.event == "released") | .status' ev.jsonl) == 81 ]]
	[[ $(jq -r 'select(.event == "preempted") | .reason' ev.jsonl) == *"pid "* ]]
	grep -q '^rlock_outcome{key="pe",outcome="ran"} 1' m.prom || fail "$(cat m.prom)"
}

@test "events: -k a -k b with b busy: a, taken then given back, ends released (75, or 143 killed while b is waited for)" {
	rlock_bg -k evb -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID
	run -75 "$RLOCK" -n -k eva -k evb --events ev.jsonl -- true
	[[ $(jq -c -s 'map([.event, .name, .status])' ev.jsonl) == \
		'[["acquired","eva",null],["busy","evb",null],["released","eva",75]]' ]] || fail "$(cat ev.jsonl)"
	rlock_bg -k eva -k evb --events sig.jsonl -- true
	wait_until 10 grep -q '"event":"waiting"' sig.jsonl
	kill -TERM "$RLOCK_PID"
	rlock_wait
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS"
	[[ $(jq -c -s 'map([.event, .name, .status])' sig.jsonl) == \
		'[["acquired","eva",null],["waiting","evb",null],["failed","evb",143],["released","eva",143]]' ]] ||
		fail "$(cat sig.jsonl)"
	# the failed line carries the waiting request's token, not the first lock's
	[[ $(jq -r -s '(map(select(.event == "waiting"))[0].token) == (map(select(.event == "failed"))[0].token)' sig.jsonl) == true ]]
	touch h.release
	rlock_wait "$holder"
}

@test "events: --release killed before its release reaches the server says failed (143), the keeper left holding" {
	run -0 --separate-stderr "$RLOCK" -k kt --acquire --events ev.jsonl
	eval "$output"
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	track_pid "$(jq -r 'select(.event == "keeper-started") | .pid' ev.jsonl)"
	kill -STOP "$REDIS_PID"
	rlock_bg -k kt --release --io-timeout 20s --events rel.jsonl
	# its signalfd is open: a SIGTERM now ends the status read, not rlock at once
	wait_until 10 eval 'ls -l /proc/$RLOCK_PID/fd 2>/dev/null | grep -q signalfd'
	kill -TERM "$RLOCK_PID"
	rlock_wait
	kill -CONT "$REDIS_PID"
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	[[ $(jq -c -s 'map([.event, .status])' rel.jsonl) == '[["failed",143]]' ]] || fail "$(cat rel.jsonl)"
	[[ $(jq -r .token rel.jsonl) == "${RLOCK_TOKEN:0:8}" ]]
	run -0 "$RLOCK" -k kt --release
}

@test "events: a release that fails (the server stopped as the command ends) says so in its released line, as stderr does; a good one carries no reason" {
	# the command stops the server: the release gets no reply within --io-timeout
	run --separate-stderr "$RLOCK" -k rf -t 10s --io-timeout 300ms --events ev.jsonl \
		-- sh -c "kill -STOP $REDIS_PID"
	kill -CONT "$REDIS_PID"
	echo "# status $status: $stderr" >&3
	assert_equal "$status" 0 # the command's own: the release's fate is said, not exited
	[[ $stderr == *"cannot release"* ]] || fail "stderr says nothing: $stderr"
	local line
	line=$(event ev.jsonl released)
	[[ -n $line ]] || fail "no released line: $(cat ev.jsonl)"
	[[ $(jq -r .status <<<"$line") == 0 ]] || fail "$line"
	[[ $(jq -r .reason <<<"$line") == "the release failed: "* ]] || fail "no reason: $line"
	# a release that worked: no reason
	run -0 "$RLOCK" -k rf2 --events ok.jsonl -- true
	[[ $(event ok.jsonl released | jq -r 'has("reason")') == false ]] || fail "$(cat ok.jsonl)"
}

@test "events: the longest name, prefix and label, each escaped six times over, still make one whole JSON line" {
	# '#' after '#' and a control byte are 6 bytes each in JSON (\u0023, \u0001)
	local name prefix label
	name=$(printf '#%.0s' {1..512})
	prefix=$(printf '#%.0s' {1..128})
	label=$(printf '\001%.0s' {1..256})
	run -0 rlock --prefix "$prefix" -k "$name" --label "$label" --events ev.jsonl -- true
	assert_equal "$(jq -r '[.event, (.name | length), (.key | length), (.label | length)] | join(" ")' ev.jsonl)" \
		"$(printf 'acquired 512 642 256\nreleased 512 642 256')"
}

@test "events: a keeper that gives its lock back before it starts (its --acquire killed while it waited) ends its acquired with keeper-released; the metrics say unavailable" {
	rlock_bg -k kg -- "$HOLD" h
	wait_until 10 test -e h.started
	local holder=$RLOCK_PID keeper
	rlock_bg -k kg -w 30s --acquire --events ev.jsonl --metrics-file m.prom
	wait_until 10 grep -q '"event":"waiting"' ev.jsonl
	keeper=$(jq -r 'select(.event == "waiting") | .pid' ev.jsonl)
	track_pid "$keeper"
	# the --acquire that would print the token dies: nobody learns it
	kill -KILL "$RLOCK_PID"
	rlock_wait
	touch h.release
	rlock_wait "$holder"
	wait_until 20 proc_gone "$keeper"
	[[ $(jq -c -s 'map([.event, .status])' ev.jsonl) == \
		'[["waiting",null],["acquired",null],["keeper-released",71]]' ]] || fail "$(cat ev.jsonl)"
	[[ $(jq -r 'select(.event == "keeper-released") | .reason' ev.jsonl) == "given back: "* ]]
	# no step ran under it: counted as failed is (unavailable), not ran
	grep -q '^rlock_outcome{key="kg",outcome="unavailable"} 1' m.prom || fail "$(cat m.prom)"
	grep -q '^rlock_exit_code{key="kg"} 71' m.prom || fail "$(cat m.prom)"
	# given back, not left to its TTL
	run -0 "$RLOCK" -k kg -n -- true
}

@test "events: -k a -k b, b taken away: the lost line names b (its name, key and token), found by a renewal or by the release" {
	# by the release: the command deletes b and ends before any renewal
	local cli=(redis-cli -p "$REDIS_PORT")
	[[ -z ${REDIS_SOCKET:-} ]] || cli=(redis-cli -s "$REDIS_SOCKET")
	run -79 "$RLOCK" -k la -k lb -t 20s --events rel.jsonl -- "${cli[@]}" DEL 'rlock:{lb}'
	[[ $(jq -c -s 'map([.event, .name])' rel.jsonl) == \
		'[["acquired","la"],["acquired","lb"],["lost","lb"],["released","la"]]' ]] || fail "$(cat rel.jsonl)"
	[[ $(jq -r -s '(map(select(.event == "acquired" and .name == "lb"))[0].token) == (map(select(.event == "lost"))[0].token)' rel.jsonl) == true ]]
	# by a renewal (ttl/3), --on-lost ignore: the command goes on, then ends
	rlock_bg -k ra -k rb -t 3s --on-lost ignore --events ren.jsonl -- "$HOLD" h
	wait_until 10 test -e h.started
	rcli DEL 'rlock:{rb}' >/dev/null
	wait_until 20 grep -q '"event":"lost"' ren.jsonl
	touch h.release
	rlock_wait
	[[ $(jq -r 'select(.event == "lost") | "\(.name) \(.key)"' ren.jsonl) == 'rb rlock:{rb}' ]] || fail "$(cat ren.jsonl)"
}

@test "events: a SIGTERM that comes while rlock releases (its command done) is died of, and the released line says so (143), not the command's 0" {
	# the command stops the server: the release waits for a reply (up to --io-timeout)
	rlock_bg -k lt -t 3s --io-timeout 1500ms --events ev.jsonl -c "kill -STOP $REDIS_PID; touch ended"
	wait_until 10 test -e ended
	# the command has exited (only the watchdog, or nothing, left under rlock): rlock
	# is in the release
	wait_until 10 not eval 'ps -o comm= --ppid "$RLOCK_PID" | grep -qx sh'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20
	kill -CONT "$REDIS_PID"
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	local line
	line=$(event ev.jsonl released)
	echo "# $line" >&3
	[[ $(jq -r .status <<<"$line") == 143 ]] || fail "the released line is not the exit status: $line"
}

@test "events: --release interrupted in its --wait-replicas WAIT (the release done) dies of the signal (143), and its keeper-released line, its history and its stderr say released (0)" {
	run -0 --separate-stderr "$RLOCK" -k kw --acquire --events ev.jsonl
	eval "$output"
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	track_pid "$(jq -r 'select(.event == "keeper-started") | .pid' ev.jsonl)"
	# no replica: the release's WAIT for one runs until --io-timeout
	rlock_bg -k kw --release --wait-replicas 1 --io-timeout 5s --events rel.jsonl
	wait_until 10 eval 'rcli client list | grep -q "cmd=wait "'
	kill -TERM "$RLOCK_PID"
	rlock_wait
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	# the lock was released: the line says the hold's end as the history does (0), as
	# a keeper's own SIGTERM does; the 143 is --release's exit alone
	[[ $(jq -c -s 'map([.event, .status])' rel.jsonl) == '[["keeper-released",0]]' ]] ||
		fail "$(cat rel.jsonl)"
	run -0 "$RLOCK" -k kw --history --json -n 1
	[[ $(jq -c '.entries[0] | [.event, .status]' <<<"$output") == '["released",0]' ]] ||
		fail "history: $output"
	grep -q "^rlock: released rlock:{kw} on the master, .*interrupted by SIGTERM" "$RLOCK_ERR" ||
		fail "stderr: $(cat "$RLOCK_ERR")"
	run -0 "$RLOCK" -k kw --status
}

@test "events: --release that a SIGTERM reaches while its release's reply is on its way releases, says so on stderr and in keeper-released (0), then dies of it (143)" {
	run -0 --separate-stderr "$RLOCK" -k kd --acquire
	eval "$output"
	track_pid "$(rlock -k kd --status --json | jq -r .pid)"
	# every reply 1 s late: the server has released when the key is gone, its reply not
	# yet read (a release is never cut short: the signal waits for it)
	delay_proxy_start 1000
	rlock_bg -u "$PROXY_URL" -k kd --release --io-timeout 5s --events rel.jsonl
	wait_until 10 key_absent 'rlock:{kd}'
	kill -TERM "$RLOCK_PID"
	rlock_wait
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	[[ $(jq -c -s 'map([.event, .status])' rel.jsonl) == '[["keeper-released",0]]' ]] ||
		fail "$(cat rel.jsonl)"
	assert_equal "$(cat "$RLOCK_ERR")" \
		"rlock: released 'kd'; then interrupted by SIGTERM (rlock --release dies of it: 143)"
	run -0 "$RLOCK" -k kd --history --json -n 1
	[[ $(jq -c '.entries[0] | [.event, .status]' <<<"$output") == '["released",0]' ]] ||
		fail "history: $output"
}
