#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the shells the tests start; bats sets $stderr
# `rlock --held`: inside the job (RLOCK_KEY/RLOCK_TOKEN, every lock of RLOCK_KEYS), or
# with -k NAME --token TOKEN: 0 while that token holds the lock, 79 once it does not,
# 69 when Redis cannot say; one read, no change. --json: held, ttl_left_ms, fence.

bats_require_minimum_version 1.5.0
load helpers

# held_as TAG ARGS...: `rlock --held ARGS` with the RLOCK_* variables `hold TAG` saw (as
# the job itself runs it).
held_as() {
	local tag=$1 line vars=()
	shift
	while IFS= read -r line; do
		case $line in
		RLOCK_KEY=* | RLOCK_TOKEN=* | RLOCK_KEYS=* | RLOCK_TOKENS=* | RLOCK_FENCE=* | RLOCK_FENCES=*)
			vars+=("$line")
			;;
		esac
	done <"$tag.env"
	env -u RLOCK_KEY -u RLOCK_TOKEN -u RLOCK_KEYS -u RLOCK_TOKENS "${vars[@]}" "$RLOCK" --held "$@"
}

# hold_bg TAG RLOCK-ARGS...: a holder running `hold TAG`, started and recorded.
hold_bg() {
	local tag=$1
	shift
	rlock_bg "$@" -- "$HOLD" "$tag"
	echo "$RLOCK_PID" >"$tag.rl"
	wait_until 10 test -e "$tag.started"
}

# let_go TAG...: the holders end their commands; wait for their rlocks to exit.
let_go() {
	local tag
	for tag in "$@"; do
		touch "$tag.release"
	done
	for tag in "$@"; do
		rlock_wait "$(cat "$tag.rl")"
	done
}

@test "held: 0 from inside the live holder's job; --json names the lease and the fence" {
	run -0 --separate-stderr "$RLOCK" -k a -- sh -c \
		'"$0" --held && echo held; "$0" --held --json' "$RLOCK"
	[[ ${lines[0]} == held ]]
	[[ ${lines[1]} =~ ^\{\"schema\":1,\"key\":\"rlock:\{a\}\",\"held\":true,\"ttl_left_ms\":[0-9]+,\"fence\":1\}$ ]]
	[[ -z $stderr ]]
}

@test "held: 79 after --break, with -k NAME --token TOKEN too; nothing changed by asking" {
	hold_bg h -k a
	run -0 held_as h
	run -0 "$RLOCK" -k a --token "$(env_of h RLOCK_TOKEN)" --held
	[[ $(rcli GET 'rlock:{a}') == "$(env_of h RLOCK_TOKEN)" ]]
	run -0 "$RLOCK" -q -k a --break
	run -79 --separate-stderr held_as h
	[[ $stderr == *"rlock:{a} is not held by token"* ]]
	run -79 --separate-stderr held_as h --json
	[[ $output == '{"schema":1,"key":"rlock:{a}","held":false,"ttl_left_ms":null,"fence":null}' ]]
	run -79 "$RLOCK" -k a --token "$(env_of h RLOCK_TOKEN)" --held
	let_go h
}

@test "held: 79 after the lease expired (its rlock SIGKILLed)" {
	hold_bg h -k e -t 1s
	run -0 held_as h
	local cmd
	cmd=$(cat h.pid)
	kill -KILL "$RLOCK_PID"
	rlock_wait
	wait_until 20 proc_gone "$cmd" # the watchdog ends the command
	wait_until 20 key_absent 'rlock:{e}'
	run -79 held_as h
}

@test "held: 69 with Redis down, one line" {
	hold_bg h -k d
	RLOCK_URL="redis://127.0.0.1:$(dead_port)" run -69 --separate-stderr held_as h
	assert_one_line_error
	let_go h
}

@test "held: a permit of -l and a shared holder" {
	hold_bg p1 -k p -l 2
	hold_bg p2 -k p -l 2
	run -0 held_as p1
	run -0 held_as p2 --json
	[[ $output == *'"held":true'* && $output == *'"fence":2}' ]]
	hold_bg s1 -k s -s
	run -0 held_as s1
	run -0 "$RLOCK" -q -k s --break
	run -79 held_as s1
	run -0 held_as p2 # a break of another lock changes nothing here
	let_go p1 p2 s1
}

@test "held: a multi-lock: every lock of RLOCK_KEYS, or one with -k" {
	hold_bg m -k a -k b
	[[ -n $(env_of m RLOCK_KEYS) ]]
	run -0 held_as m --json
	[[ $output == '{"schema":1,"held":true,"ttl_left_ms":'*',"fence":null,"locks":[{"key":"rlock:{a}","held":true,'*'{"key":"rlock:{b}","held":true,'* ]]
	run -0 "$RLOCK" -q -k b --break
	run -79 held_as m
	run -79 --separate-stderr held_as m --json
	[[ $output == '{"schema":1,"held":false,"ttl_left_ms":null,"fence":null,"locks":[{"key":"rlock:{a}","held":true,'*'{"key":"rlock:{b}","held":false,"ttl_left_ms":null,"fence":null}]}' ]]
	run -0 held_as m -k a # the token the environment pairs with rlock:{a}
	run -79 held_as m -k b
	let_go m
	# and --help says so (it named only -k NAME --token TOKEN)
	run -0 "$RLOCK" --help
	assert_output --partial '-k NAME: that one, with --token TOKEN or the'
}

@test "held: bad input is a usage error (64) with one line that names it" {
	local tok=0123456789abcdef0123456789abcdef
	run -64 --separate-stderr env -u RLOCK_KEY -u RLOCK_TOKEN -u RLOCK_KEYS "$RLOCK" --held
	assert_one_line_error
	[[ $stderr == *"--held needs a lock"* ]]
	run -64 --separate-stderr env -u RLOCK_KEY -u RLOCK_TOKEN -u RLOCK_KEYS "$RLOCK" -k a --held
	assert_one_line_error
	[[ $stderr == *"--held -k a needs the holder's token"* ]]
	run -64 --separate-stderr "$RLOCK" -k a --token nothex --held
	assert_one_line_error
	[[ $stderr == *"--token: not an rlock token"* ]]
	run -64 --separate-stderr "$RLOCK" --token "$tok" --held
	assert_one_line_error
	[[ $stderr == *"--token goes with -k NAME"* ]]
	run -64 --separate-stderr env RLOCK_KEY=plain RLOCK_TOKEN="$tok" "$RLOCK" --held
	assert_one_line_error
	[[ $stderr == *"'plain' (from RLOCK_KEY or RLOCK_KEYS) is not an rlock key"* ]]
	run -64 --separate-stderr "$RLOCK" --held -- true
	assert_one_line_error
	[[ $stderr == *"no command is run with --held"* ]]
	run -64 --separate-stderr "$RLOCK" -k a --token "$tok" --held --break
	assert_one_line_error
}

@test "held: Redlock over 3 nodes: a majority must say so" {
	local u=() pids=() i
	for i in 0 1 2; do
		redis_start
		u+=("$REDIS_URL")
		pids+=("$REDIS_PID")
	done
	local urls
	urls=$(
		IFS=,
		echo "${u[*]}"
	)
	rcli_n() { redis-cli -u "${u[$1]}" "${@:2}"; }
	hold_bg r -k r --url "$urls"
	# A node that is up answers within 2 s even on a loaded machine: only the paused one is silent.
	RLOCK_URL=$urls run -0 held_as r --node-timeout 2s
	kill -STOP "${pids[2]}" # 2 of 3 still say so
	RLOCK_URL=$urls run -0 held_as r --node-timeout 2s
	rcli_n 1 DEL 'rlock:{r}' >/dev/null # 1 says so, 1 says not, 1 silent: cannot tell
	RLOCK_URL=$urls run -69 --separate-stderr held_as r --node-timeout 2s
	[[ $stderr == *"cannot tell whether rlock:{r} is held: 1 of 3 Redlock nodes have the token, 1 did not answer (2 needed)"* ]]
	kill -CONT "${pids[2]}"
	rcli_n 0 DEL 'rlock:{r}' >/dev/null # 1 of 3: not held
	RLOCK_URL=$urls run -79 held_as r --node-timeout 2s
	let_go r
	for i in 0 1 2; do
		redis_stop "${pids[$i]}"
	done
}
