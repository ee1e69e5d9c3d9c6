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

# strict_json: stdin is UTF-8 JSON (one document, or one per line with --lines).
strict_json() {
	python3 -c '
import json, sys
data = sys.stdin.buffer.read().decode("utf-8")  # strict: a stray byte fails
docs = data.splitlines() if sys.argv[1:] == ["--lines"] else [data]
for d in docs:
    json.loads(d)
' "$@"
}

@test "--label with bytes that are not UTF-8, a line break, an escape: every JSON output stays valid UTF-8 JSON (issue 33)" {
	require_tool python3
	local label=$'bad \xff\xfe caf\xc3\xa9 \e[31m\n::warning::pwned'
	rlock_bg -k lj --label "$label" --events "$PWD/ev.jsonl" -- "$HOLD" a
	wait_until 30 test -e a.started
	track_pidfile a.pid
	run -75 --separate-stderr rlock -k lj --status --json
	strict_json <<<"$output" || fail "--status --json: $output"
	[[ $(jq -r .label <<<"$output") == $'bad \xef\xbf\xbd\xef\xbf\xbd caf\xc3\xa9 \e[31m\n::warning::pwned' ]] || fail "$output"
	run -0 --separate-stderr rlock --list --json
	strict_json <<<"$output" || fail "--list --json: $output"
	touch a.release
	rlock_wait "$RLOCK_PID" 30
	strict_json --lines <ev.jsonl || fail "events: $(cat ev.jsonl)"
	run -0 --separate-stderr rlock -k lj --history --json
	strict_json <<<"$output" || fail "--history --json: $output"
	# The terminal's text shows each byte escaped, one line.
	run -0 --separate-stderr rlock -k lj --history
	[[ $output != *$'\e'* && $output != *$'\xff'* ]] || fail "$output"
}
