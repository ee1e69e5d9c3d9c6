#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154  # bats sets $stderr
# --label TEXT: stored with the holder (the owner hash's `label`), shown escaped by
# --status, --list, the busy/waiting line, and in --json.

load helpers

setup_file() { common_setup_file --unix; }

@test "--label is stored with the holder and shown escaped by --status, --list, --json and the busy line" {
	local label=$'deploy https://ci.example/j/1 \e[31mred\nnext'
	rlock_bg -k lb --label "$label" -- "$HOLD" a
	wait_until 30 test -e a.started
	track_pidfile a.pid
	[[ $(rcli HGET 'rlock:{lb}:owner' label) == "$label" ]]
	run -75 --separate-stderr rlock -k lb --status
	assert_line '  label    deploy https://ci.example/j/1 \x1b[31mred\x0anext'
	run -75 --separate-stderr rlock -k lb --status --json
	[[ $(jq -r .label <<<"$output") == "$label" ]] || fail "json: $output"
	run -0 --separate-stderr rlock --list
	assert_output --partial '[deploy https://ci.example/j/1 \x1b[31mred\x0anext]'
	run -75 --separate-stderr rlock -k lb -n -- true
	assert_regex "$stderr" 'busy: held by .* \[deploy https://ci.example/j/1 \\x1b\[31mred\\x0anext\]'
	[[ $stderr != *$'\e'* ]] || fail "an escape reached the terminal"
	touch a.release
	rlock_wait "$RLOCK_PID" 30
	# Shared holders carry it too; a keeper's lock as well.
	rlock_bg -k lb -s --label reader -- "$HOLD" s
	wait_until 30 test -e s.started
	run -75 --separate-stderr rlock -k lb --status
	assert_line '  label    reader'
	touch s.release
	rlock_wait "$RLOCK_PID" 30
	run -0 --separate-stderr rlock -k lb --acquire --label 'keeper job'
	eval "$output"
	[[ $(rcli HGET 'rlock:{lb}:owner' label) == 'keeper job' ]]
	run -0 rlock -k lb --release
	run -64 --separate-stderr rlock -k lb --label "$(printf 'x%.0s' {1..257})" -- true
}
