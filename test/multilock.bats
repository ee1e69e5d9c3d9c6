#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154,SC2153  # quoted $: for the commands rlock runs; bats sets $stderr
# Several locks at once (-k A -k B ...): all or nothing, taken in sorted order so that
# `-k A -k B` and `-k B -k A` never deadlock; one fence per lock in the environment;
# the loss of any one is the loss of the set (79).

load helpers

setup_file() { common_setup_file --unix; }

@test "-k A -k B vs -k B -k A -k A, -k B -k C -k A from many contenders: no deadlock, no overlap" {
	# probe NAME...: enter each lock's critical section (an atomic mkdir that fails if
	# someone else is inside), stay a moment, leave; a failed mkdir is an overlap.
	cat >probe <<'EOF_PROBE'
#!/bin/sh
for n in "$@"; do mkdir "in.$n" 2>/dev/null || echo "overlap on $n (fences $RLOCK_FENCES)" >>overlaps; done
sleep 0.01
for n in "$@"; do rmdir "in.$n"; done
echo "$*" >>done.log
EOF_PROBE
	chmod +x probe
	local workers=8 rounds=6 i pids=() t0 t1
	t0=$(now_ms)
	for ((i = 0; i < workers; i++)); do
		case $((i % 4)) in
		0) set -- -k A -k B -- ./probe A B ;;
		1) set -- -k B -k A -- ./probe A B ;;
		2) set -- -k A -- ./probe A ;;
		3) set -- -k B -k C -k A -- ./probe A B C ;;
		esac
		(
			for ((r = 0; r < rounds; r++)); do
				"$RLOCK" -w 120s -t 10s "$@" || echo "rlock exited $?" >>failures
			done
		) 3>&- 4>&- &
		pids+=($!)
	done
	local p
	for p in "${pids[@]}"; do
		track_pid "$p"
		wait_until 150 proc_gone "$p" || fail "a contender is stuck (deadlock?)"
	done
	t1=$(now_ms)
	local n
	n=$(wc -l <done.log)
	echo "# $workers contenders x $rounds rounds (A+B, B+A, A, B+C+A): $n critical sections in $((t1 - t0)) ms, overlaps: $(wc -l <overlaps 2>/dev/null || echo 0)" >&3
	[[ ! -e failures ]] || fail "$(cat failures)"
	[[ ! -e overlaps ]] || fail "$(cat overlaps)"
	((n == workers * rounds))
	# The fences count every acquisition of each lock.
	[[ $(rcli GET 'rlock:{A}:fence') == $((workers * rounds)) ]]
	[[ $(rcli GET 'rlock:{B}:fence') == $((workers * rounds * 3 / 4)) ]]
}

@test "all or nothing: B busy → 75 and A is not left held; the environment lists every lock" {
	rcli SET 'rlock:{B}' other PX 600000 >/dev/null
	run -75 --separate-stderr rlock -k A -k B -n -- touch ran
	[[ ! -e ran ]]
	key_absent 'rlock:{A}' || fail "A was left held"
	run -75 --separate-stderr rlock -k B -k A -w 300ms -- touch ran
	[[ ! -e ran ]]
	key_absent 'rlock:{A}' || fail "A was left held"
	rcli DEL 'rlock:{B}' >/dev/null
	touch both.release # hold records the environment and returns at once
	run -0 rlock -k B -k A -- "$HOLD" both
	[[ $(env_of both RLOCK_KEY) == 'rlock:{A}' ]]
	[[ $(env_of both RLOCK_KEYS) == 'rlock:{A} rlock:{B}' ]]
	# A was taken (fences 1, 2) and given back by the two attempts that found B busy.
	[[ $(env_of both RLOCK_FENCES) == '3 1' ]] || fail "fences: $(env_of both RLOCK_FENCES)"
	key_absent 'rlock:{A}'
	key_absent 'rlock:{B}'
	run -64 --separate-stderr rlock -k A -k A -- true
	run -64 --separate-stderr rlock -k A -k B --status
}

@test "a busy or mismatched lock beyond the first is the one named: 75 or 64, as for the first" {
	rcli SET 'rlock:{B}' other PX 600000 >/dev/null
	run -75 --separate-stderr rlock -k A -k B -n -- true
	assert_equal "$stderr" "rlock: lock 'B' is busy"
	rcli DEL 'rlock:{B}' >/dev/null
	rlock_bg -l 2 -k B -- "$HOLD" b
	wait_until 20 test -e b.started
	run -64 --separate-stderr rlock -l 3 -k A -k B -- touch ran
	assert_equal "$stderr" "rlock: lock 'B': acquire: the lock is held with --limit 2, this request asks for --limit 3"
	[[ ! -e ran ]]
	key_absent 'rlock:{A}:holders' || fail "A was left held"
	touch b.release
	rlock_wait
}

@test "the loss of any one lock is the loss of all: 79, the command's group stopped" {
	rlock_bg -k A -k B -t 3s -- "$HOLD" l
	wait_until 30 test -e l.started
	track_pidfile l.pid
	rcli SET 'rlock:{B}' stolen PX 600000 >/dev/null
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 79 ]] || fail "exit $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	grep -q 'rlock:{B}' "$RLOCK_ERR" || fail "does not say which lock: $(cat "$RLOCK_ERR")"
	run -0 pidfile_gone l.pid
	key_absent 'rlock:{A}' || fail "A was not released"
	[[ $(rcli GET 'rlock:{B}') == stolen ]]
	# each name's history says how that one ended: B lost, A held to the end, released
	run -0 rlock -k B --history --json
	jq -e '.entries[0].event == "lost"' <<<"$output" >/dev/null || fail "B: $output"
	run -0 rlock -k A --history --json
	jq -e '.entries[0].event == "released" and .entries[0].status == 143' <<<"$output" \
		>/dev/null || fail "A: $output"
}

@test "a lock taken first and lost while the next one is waited for: both given back and taken again, the command runs (was 69, 'Redis unavailable')" {
	rcli SET 'rlock:{B}' other PX 4000 >/dev/null
	rlock_bg -t 3s -k A -k B -- sh -c 'echo "$RLOCK_FENCES" >fences'
	wait_until 30 key_exists 'rlock:{A}'
	rcli DEL 'rlock:{A}' >/dev/null # broken: its renewal (every second) finds it gone
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 0 ]] || fail "exit $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	# A taken again (fence 2), B once given back and taken again (fence 2)
	assert_equal "$(cat fences)" '2 2'
	grep -q 'a lock was lost while waiting for the others (.*); giving them back and taking them all again' "$RLOCK_ERR" ||
		fail "$(cat "$RLOCK_ERR")"
	key_absent 'rlock:{A}'
	key_absent 'rlock:{B}'
}

@test "the first lock (sorted) of several lost, while the command runs or found at the release: 79, and it is named as the others are" {
	# seen by a renewal: the command's group is stopped, the line names rlock:{A}
	rlock_bg -k B -k A -t 3s -- "$HOLD" r
	wait_until 30 test -e r.started
	track_pidfile r.pid
	rcli DEL 'rlock:{A}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 79 ]] || fail "exit $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	grep -q '^rlock: lock lost: rlock:{A}: the lock is no longer ours' "$RLOCK_ERR" ||
		fail "does not say which lock: $(cat "$RLOCK_ERR")"
	key_absent 'rlock:{B}' || fail "B was not released"
	# found at the release (the command deleted it as its last act): named too
	run -79 --separate-stderr rlock -s -k B -k A -- sh -c "\"\$RLOCK\" -k A --break >/dev/null 2>&1"
	grep -q '^rlock: lock lost: rlock:{A} was no longer held at the release: broken' <<<"$stderr" ||
		fail "does not say which lock: $stderr"
	key_absent 'rlock:{B}:holders' || fail "B was not released"
}

@test "--warn with several locks: the warning names the lock whose renewal is late" {
	rlock_bg -k wa -k wb -t 3s --warn USR1 -c 'trap "touch warned" USR1
trap "exit 0" TERM
touch started
while [ ! -e go ]; do sleep 0.02; done'
	wait_until 10 test -e started
	kill -STOP "$REDIS_PID"
	wait_until 30 test -e warned
	kill -CONT "$REDIS_PID"
	touch go
	rlock_wait
	grep -E '^rlock: a renewal of rlock:\{w[ab]\} is a third of the ttl late: sending SIGUSR1' \
		"$RLOCK_ERR" || fail "$(cat "$RLOCK_ERR")"
}
