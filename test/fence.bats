#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # $RLOCK_* expand in the command's shell; bats sets $stderr
# Fences are exact signed 64-bit integers end to end (SPEC §11): a counter seeded above
# 2^53, where a Lua number (a double) rounds, hands out exactly seed+1, seed+2, ... in
# every mode, in every output that shows a fence, and over a Redlock quorum (the merge
# takes the exact maximum); a counter that cannot count (at INT64_MAX, not an integer)
# refuses at once with 69 and one line, leaving nothing held and nothing changed.
# Fences are read as text (grep, bash's 64-bit arithmetic), never through jq (doubles).

load helpers

ABOVE53=9007199254740993 # 2^53 + 1: the first integer a double cannot hold
NEARMAX=9223372036854775000
MAX=9223372036854775807
NEARMIN=-9223372036854775000

# Three more servers for the Redlock tests (their ports in NODE_PORTS), then the file's
# own server (REDIS_*), the one every other test uses.
setup_file() {
	local ports=() _
	for _ in 0 1 2; do
		redis_start
		ports+=("$REDIS_PORT")
	done
	export NODE_PORTS="${ports[*]}"
	common_setup_file
}

setup() {
	common_setup
	local p
	for p in $NODE_PORTS; do
		redis-cli -p "$p" FLUSHALL >/dev/null
	done
}

# seed NAME VALUE: set the fence counter of NAME on the file's server.
seed() { rcli SET "rlock:{$1}:fence" "$2" >/dev/null; }

# has_fence TEXT N: TEXT (JSON) says "fence":N exactly (not a prefix of a longer number).
has_fence() { [[ $1 =~ \"fence\":$2[,}] ]] || fail "no \"fence\":$2 in: $1"; }

# only_fence_left NAME VALUE: nothing of NAME is left but its counter, still at VALUE
# (and the history of an earlier run, expiring).
only_fence_left() {
	local keys
	keys=$(rcli --scan --pattern "rlock:{$1}*" | grep -v ':history$')
	[[ $keys == "rlock:{$1}:fence" ]] || fail "keys left: $keys"
	history_expiring "rlock:{$1}:history" || fail "the history does not expire"
	assert_equal "$(rcli GET "rlock:{$1}:fence")" "$2"
}

@test "exclusive: a counter seeded above 2^53 hands out exactly seed+1, seed+2 (RLOCK_FENCE, owner hash, --status)" {
	local s
	for s in $ABOVE53 $NEARMAX; do
		seed f "$s"
		run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
		assert_output "$((s + 1))"
		assert_equal "$(rcli GET 'rlock:{f}:fence')" "$((s + 1))"
		rlock_bg -k f -- "$HOLD" "a$s"
		wait_until 30 test -e "a$s.started"
		assert_equal "$(env_of "a$s" RLOCK_FENCE)" "$((s + 2))"
		assert_equal "$(rcli HGET 'rlock:{f}:owner' fence)" "$((s + 2))"
		run -75 rlock -k f --status --json
		has_fence "$output" "$((s + 2))"
		run -75 rlock -k f --status
		assert_line "  fence    $((s + 2))"
		touch "a$s.release"
		rlock_wait
		assert_equal "$RLOCK_STATUS" 0
		run -0 rlock -k f --status --json
		has_fence "$output" "$((s + 2))"
		run -0 rlock -k f --status
		assert_output "rlock:{f} is free (last fence $((s + 2)))"
	done
}

@test "every mode: -s, -l N, --fair and several -k count exactly past 2^53" {
	local mode s=$NEARMAX
	for mode in -s '-l 3' --fair; do
		# shellcheck disable=SC2086  # $mode is one or two options
		{
			seed f "$s"
			run -0 rlock $mode -k f -c 'echo "$RLOCK_FENCE"'
			assert_output "$((s + 1))"
			run -0 rlock $mode -k f -c 'echo "$RLOCK_FENCE"'
			assert_output "$((s + 2))"
			assert_equal "$(rcli GET 'rlock:{f}:fence')" "$((s + 2))"
		}
	done
	# several names: each its own counter, each exact
	seed f "$ABOVE53"
	seed g "$NEARMAX"
	run -0 rlock -k f -k g -c 'echo "$RLOCK_FENCE $RLOCK_FENCES"'
	assert_output "$((ABOVE53 + 1)) $((ABOVE53 + 1)) $((NEARMAX + 1))"
	run -0 rlock -s -k f -k g -c 'echo "$RLOCK_FENCES"'
	assert_output "$((ABOVE53 + 2)) $((NEARMAX + 2))"
}

@test "shared holders: each its own exact fence in the meta JSON, --status and --list (text and JSON)" {
	seed f "$NEARMAX"
	rlock_bg -s -k f -- "$HOLD" a
	local a=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -s -k f -- "$HOLD" b
	local b=$RLOCK_PID
	wait_until 30 test -e b.started
	assert_equal "$(env_of a RLOCK_FENCE)" "$((NEARMAX + 1))"
	assert_equal "$(env_of b RLOCK_FENCE)" "$((NEARMAX + 2))"
	local meta
	meta=$(rcli HGET 'rlock:{f}:meta' "$(env_of b RLOCK_TOKEN)")
	[[ $meta == *"\"fence\":\"$((NEARMAX + 2))\""* ]] || fail "meta: $meta"
	run -75 rlock -k f --status --json
	has_fence "$output" "$((NEARMAX + 1))"
	has_fence "$output" "$((NEARMAX + 2))"
	run -75 rlock -k f --status
	assert_line "  fence    $((NEARMAX + 1))"
	assert_line "  fence    $((NEARMAX + 2))"
	run -0 rlock --list --json
	has_fence "$output" "$((NEARMAX + 2))"
	run -0 rlock --list
	assert_output --partial '[shared]'
	touch a.release b.release
	rlock_wait "$a"
	rlock_wait "$b"
}

@test "a negative seed near INT64_MIN counts up exactly" {
	seed f "$NEARMIN"
	run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
	assert_output "$((NEARMIN + 1))"
	run -0 rlock -s -k f -c 'echo "$RLOCK_FENCE"'
	assert_output "$((NEARMIN + 2))"
	run -0 rlock -k f --status --json
	has_fence "$output" "$((NEARMIN + 2))"
}

@test "the --acquire keeper prints the exact fence; --break's log names it" {
	seed ci "$NEARMAX"
	run -0 --separate-stderr rlock -k ci --acquire
	local pid
	pid=$(rcli HGET 'rlock:{ci}:owner' pid)
	track_pid "$pid"
	assert_line "RLOCK_FENCE='$((NEARMAX + 1))'; export RLOCK_FENCE"
	assert_equal "$(rcli HGET 'rlock:{ci}:owner' fence)" "$((NEARMAX + 1))"
	run -0 --separate-stderr env "RLOCK_TOKEN=$(rcli GET 'rlock:{ci}')" "$RLOCK" -k ci --release
	wait_until 20 proc_gone "$pid"
	# --break of a holder: the log line names its exact fence
	rlock_bg -k ci -- "$HOLD" a
	wait_until 30 test -e a.started
	run -0 --separate-stderr rlock -k ci --break
	assert_regex "$stderr" "broke rlock:\{ci\}: .*, fence $((NEARMAX + 2))\$"
	touch a.release
	rlock_wait
}

@test "a counter at INT64_MAX: 69 at once in every mode, one line, nothing held or changed" {
	local mode
	seed f $((MAX - 1))
	run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
	assert_output "$MAX"
	for mode in '' -s '-l 2' --fair; do
		# shellcheck disable=SC2086  # $mode is zero, one or two options
		run -69 --separate-stderr rlock $mode -k f -n -- touch ran
		assert_one_line_error
		assert_regex "$stderr" 'fence counter rlock:\{f\}:fence is at the largest 64-bit integer'
		[[ ! -e ran ]] || fail "ran with $mode"
		only_fence_left f "$MAX"
	done
	# a waiter is refused at once too, not after its --wait (waiting cannot fix it)
	rcli SET 'rlock:{f}' by-hand PX 600000 >/dev/null
	run -69 --separate-stderr rlock -k f -w 60s -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	assert_equal "$(rcli GET 'rlock:{f}:fence')" "$MAX"
	rcli DEL 'rlock:{f}' >/dev/null
	run -0 rlock -k f --status --json
	has_fence "$output" "$MAX"
}

@test "a counter that is not a 64-bit integer: 69, one clear line, nothing held; --status says null" {
	local v mode
	for v in abc 1.5 007 ' 1' 9223372036854775808 -9223372036854775809; do
		for mode in '' -s --fair; do
			seed f "$v"
			# shellcheck disable=SC2086  # $mode is zero or one option
			run -69 --separate-stderr rlock $mode -k f -n -- touch ran
			assert_one_line_error
			assert_regex "$stderr" 'fence counter rlock:\{f\}:fence does not hold a 64-bit integer'
			[[ ! -e ran ]] || fail "ran with $mode and a counter '$v'"
			only_fence_left f "$v"
		done
	done
	run -0 rlock -k f --status --json
	has_fence "$output" null
	run -0 rlock -k f --status
	assert_output 'rlock:{f} is free (the fence counter holds no 64-bit integer)'
	rcli DEL 'rlock:{f}:fence' >/dev/null
	rcli HSET 'rlock:{f}:fence' x 1 >/dev/null
	run -69 --separate-stderr rlock -k f -n -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'cannot read the fence counter rlock:\{f\}:fence: WRONGTYPE'
	[[ ! -e ran ]]
	key_absent 'rlock:{f}'
	run -0 rlock -k f --status --json
	has_fence "$output" null
}

@test "the lost-update checker compares fences above 2^53 as integers (it used awk's doubles)" {
	seed lu "$ABOVE53"
	run -0 --separate-stderr "$RLOCK_SOURCE_DIR/scripts/lost-update-check" --rlock "$RLOCK" \
		-p 3 -i 4 -s 0 -k lu -d "$BATS_TEST_TMPDIR/lu"
	assert_output 'count=12 expected=12 overlaps=0 errors=0 fences=ok'
	assert_equal "$(rcli GET 'rlock:{lu}:fence')" $((ABOVE53 + 12))
}

@test "the seeding recipe (docs/recipes.md): after a data loss, fences start above every earlier one" {
	local _ before seeded recipe
	for _ in 1 2 3; do
		run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
	done
	before=$output
	rcli FLUSHALL >/dev/null # the server lost its data
	recipe=$(awk '$0 == "<!-- recipe:fence-seed -->" { f = 1; next }
		f == 1 && /^```/ { f = 2; next } f == 2 && /^```/ { exit } f == 2 { print }' \
		"$RLOCK_SOURCE_DIR/docs/recipes.md")
	[[ $recipe == *"'rlock:{NAME}:fence'"* ]] || fail "no fence-seed recipe in docs/recipes.md: $recipe"
	(
		# shellcheck disable=SC2317  # called by the recipe
		redis-cli() { command redis-cli -p "$REDIS_PORT" "$@"; }
		eval "${recipe//NAME/f}"
	) >/dev/null
	seeded=$(rcli GET 'rlock:{f}:fence')
	((seeded > before)) || fail "seeded $seeded, not above $before"
	run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
	assert_output "$((seeded + 1))"
	run -0 rlock -k f -c 'echo "$RLOCK_FENCE"'
	assert_output "$((seeded + 2))"
}

# Redlock over the three nodes, each counter seeded differently above 2^53 (Redlock
# takes exclusive locks only).
@test "Redlock: the merge takes the exact maximum of the nodes' counters, in every node" {
	local ports urls='' p
	read -r -a ports <<<"$NODE_PORTS"
	for p in "${ports[@]}"; do
		urls+=${urls:+,}redis://127.0.0.1:$p
	done
	redis-cli -p "${ports[0]}" SET 'rlock:{r}:fence' "$ABOVE53" >/dev/null
	redis-cli -p "${ports[1]}" SET 'rlock:{r}:fence' "$NEARMAX" >/dev/null
	redis-cli -p "${ports[2]}" SET 'rlock:{r}:fence' $((NEARMAX - 1000)) >/dev/null
	run -0 --separate-stderr rlock -u "$urls" -k r -c 'echo "$RLOCK_FENCE"'
	assert_output "$((NEARMAX + 1))"
	for p in "${ports[@]}"; do
		assert_equal "$(redis-cli -p "$p" GET 'rlock:{r}:fence')" "$((NEARMAX + 1))"
	done
	run -0 --separate-stderr rlock -u "$urls" -k r -c 'echo "$RLOCK_FENCE"'
	assert_output "$((NEARMAX + 2))"
	run -0 --separate-stderr rlock -u "$urls" -k r --status --json
	has_fence "$output" "$((NEARMAX + 2))"
	# one node at INT64_MAX refuses; the other two are a quorum and merge exactly
	redis-cli -p "${ports[2]}" SET 'rlock:{r}:fence' "$MAX" >/dev/null
	run -0 --separate-stderr rlock -u "$urls" -k r -c 'echo "$RLOCK_FENCE"'
	assert_output "$((NEARMAX + 3))"
	assert_equal "$(redis-cli -p "${ports[2]}" GET 'rlock:{r}:fence')" "$MAX"
	# held by a quorum: --status shows the holder's merged fence, not the largest counter
	rlock_bg -u "$urls" -k r -- "$HOLD" a
	wait_until 30 test -e a.started
	assert_equal "$(env_of a RLOCK_FENCE)" "$((NEARMAX + 4))"
	run -75 --separate-stderr rlock -u "$urls" -k r --status --json
	has_fence "$output" "$((NEARMAX + 4))"
	run -75 --separate-stderr rlock -u "$urls" -k r --status
	assert_line "  fence    $((NEARMAX + 4))"
	touch a.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
	# negative counters: the largest is the one nearest zero
	redis-cli -p "${ports[0]}" SET 'rlock:{n}:fence' "$NEARMIN" >/dev/null
	redis-cli -p "${ports[1]}" SET 'rlock:{n}:fence' $((NEARMIN + 7)) >/dev/null
	redis-cli -p "${ports[2]}" SET 'rlock:{n}:fence' -3 >/dev/null
	run -0 --separate-stderr rlock -u "$urls" -k n -c 'echo "$RLOCK_FENCE"'
	assert_output -2
	for p in "${ports[@]}"; do
		assert_equal "$(redis-cli -p "$p" GET 'rlock:{n}:fence')" -2
	done
	# two of three at INT64_MAX: no quorum can count, 69 with one line, nothing held
	redis-cli -p "${ports[1]}" SET 'rlock:{r}:fence' "$MAX" >/dev/null
	run -69 --separate-stderr rlock -u "$urls" -k r -n -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	for p in "${ports[@]}"; do
		assert_equal "$(redis-cli -p "$p" EXISTS 'rlock:{r}')" 0
	done
}
