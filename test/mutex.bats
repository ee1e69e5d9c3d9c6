#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Mutual exclusion, end to end: the lost-update checker (scripts/lost-update-check).
# K concurrent workers do non-atomic read-sleep-write increments of a counter file under
# rlock: the final count is exact, no two workers overlap, fences strictly increase.
# The same checker without rlock must lose updates (proof that it can detect a bug).

load helpers

export BATS_TEST_TIMEOUT=180
CHECK=$RLOCK_SOURCE_DIR/scripts/lost-update-check

@test "without a lock the checker detects lost updates (sensitivity)" {
	run -1 "$CHECK" --no-lock -p 6 -i 20 -d "$BATS_TEST_TMPDIR/nolock"
	echo "# without rlock: $output" >&3
	local count=${output#count=}
	count=${count%% *}
	((count < 120)) || fail "no lost update without a lock: $output"
}

@test "6 workers × 20 increments under rlock: exact count, no overlap" {
	local t0 t1
	t0=$(now_ms)
	run -0 "$CHECK" --rlock "$RLOCK" -p 6 -i 20 -k mutex -d "$BATS_TEST_TMPDIR/lock"
	t1=$(now_ms)
	echo "# with rlock: $output in $((t1 - t0)) ms" >&3
	assert_output --partial 'count=120 expected=120 overlaps=0 errors=0 fences=ok'
	key_absent 'rlock:{mutex}'
	assert_equal "$(rcli GET 'rlock:{mutex}:fence')" 120
}

@test "short TTL (renewals during the critical section): still exact" {
	run -0 "$CHECK" --rlock "$RLOCK" -p 4 -i 6 -s 0.4 -k mutex-ttl -d "$BATS_TEST_TMPDIR/ttl" \
		-- -t 600ms
	echo "# with rlock -t 600ms, 400 ms critical sections: $output" >&3
	assert_output --partial 'count=24 expected=24 overlaps=0 errors=0 fences=ok'
}
