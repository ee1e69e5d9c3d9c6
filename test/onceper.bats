#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# --once-per DUR (issue 26, cron): after the command succeeds, the name is marked done
# for DUR (PREFIX{NAME}:done, with that TTL, written by the release script); a later run
# inside the window skips with the -E status and says when the window ends; a failed
# run marks nothing, so the next one retries; --status shows the mark.

load helpers

setup_file() { common_setup_file --unix; }

@test "--once-per: after a success, a run inside the window skips with the -E status and says when it ends" {
	run -0 --separate-stderr rlock -k op --once-per 1h -c 'echo ran >>runs'
	[[ $(grep -c ran runs) == 1 ]]
	key_absent 'rlock:{op}' || fail "the lock was not released"
	# the mark: the fence of the run that succeeded, with the window as its TTL
	[[ $(rcli GET 'rlock:{op}:done') == 1 ]]
	local pttl
	pttl=$(rcli PTTL 'rlock:{op}:done')
	((pttl > 3500000 && pttl <= 3600000)) || fail "PTTL of the mark: $pttl"
	run -75 --separate-stderr rlock -k op --once-per 1h -c 'echo ran >>runs'
	[[ $(grep -c ran runs) == 1 ]] || fail "the command ran again inside the window"
	assert_one_line_error
	assert_regex "$stderr" "lock 'op' is done for this window \(--once-per: a run succeeded\); the window ends at [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} [-+][0-9]{4} \(in [0-9.]+ s\)"
	# -E: its own status; -E 0 skips silently
	run -3 --separate-stderr rlock -E 3 -k op --once-per 1h -- true
	run -0 --separate-stderr rlock -E 0 -k op --once-per 1h -c 'echo ran >>runs'
	[[ -z $stderr ]]
	[[ $(grep -c ran runs) == 1 ]]
	# without --once-per the mark binds nothing (the fence counts on)
	run -0 rlock -k op -- true
	[[ $(rcli GET 'rlock:{op}:fence') == 2 ]]
}

@test "--once-per: a failed run marks nothing; the next run retries, and its success marks" {
	run -7 rlock -k op --once-per 1h -c 'echo try >>runs; exit 7'
	key_absent 'rlock:{op}:done' || fail "a failed run left the mark"
	run -0 rlock -k op --once-per 1h -c 'echo try >>runs'
	[[ $(grep -c try runs) == 2 ]]
	key_exists 'rlock:{op}:done'
	# a command killed by a signal is no success either
	rcli DEL 'rlock:{op}:done' >/dev/null
	run ! rlock -k op --once-per 1h -c 'kill -TERM $$'
	key_absent 'rlock:{op}:done' || fail "a killed run left the mark"
}

@test "--once-per: the window ends by its TTL, and the next run runs" {
	run -0 rlock -k op --once-per 300ms -c 'echo ran >>runs'
	# Inside the window (a fresh mark, checked first) or already past it on a slow
	# machine: the test only relies on the window's end.
	wait_until 10 key_absent 'rlock:{op}:done'
	run -0 rlock -k op --once-per 300ms -c 'echo ran >>runs'
	[[ $(grep -c ran runs) == 2 ]]
}

@test "--once-per: a waiter behind a run that succeeds skips instead of running again" {
	rlock_bg -k op --once-per 1h -- "$HOLD" a
	local holder=$RLOCK_PID
	wait_until 10 test -e a.started
	rlock_bg -k op --once-per 1h -c 'echo ran >>runs'
	local waiter=$RLOCK_PID
	wait_until 10 key_exists 'rlock:{op}:waiters'
	touch a.release
	rlock_wait "$waiter"
	[[ $RLOCK_STATUS == 75 ]] || fail "the waiter exited $RLOCK_STATUS"
	[[ ! -e runs ]] || fail "the waiter ran the command again"
	rlock_wait "$holder"
	[[ $RLOCK_STATUS == 0 ]]
}

@test "--once-per composes with --min-hold: both the lease and the mark are kept" {
	run -0 rlock -k op --once-per 1h --min-hold 1h -- true
	key_exists 'rlock:{op}'
	key_exists 'rlock:{op}:done'
	[[ $(rcli HGET 'rlock:{op}:owner' kept) == 1 ]]
	run -75 --separate-stderr rlock -n -k op --once-per 1h -- true
	assert_regex "$stderr" 'is done for this window'
}

@test "--status shows the mark (text and JSON)" {
	run -0 rlock -k op --once-per 1h -- true
	run -0 --separate-stderr rlock -k op --status
	assert_regex "$output" 'is free'
	assert_regex "$output" 'done     by the run of fence 1: --once-per skips runs until [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}'
	run -0 --separate-stderr rlock -k op --status --json
	assert_regex "$output" '"done":\{"fence":1,"left_ms":[0-9]+,"until_ms":[0-9]+\}'
	rcli DEL 'rlock:{op}:done' >/dev/null
	run -0 --separate-stderr rlock -k op --status --json
	[[ $output != *'"done"'* ]]
}

@test "a --once-per mark of another type (set by hand, no expiry): --status shows it, --reset clears it; the name is never stuck skipping" {
	# every --once-per run skips on any key there (75); --status said free with no mark
	# and --reset "nothing cleared", leaving it: no run could ever clear it
	rcli HSET 'rlock:{dh}:done' a b >/dev/null
	run -75 --separate-stderr rlock -k dh --once-per 1h -- touch ran
	[[ ! -e ran ]]
	run -0 --separate-stderr rlock -k dh --status
	assert_regex "$output" 'done     by the run of fence \?: --once-per skips runs \(no expiry'
	run -0 --separate-stderr rlock -k dh --status --json
	assert_regex "$output" '"done":\{"fence":null,"left_ms":null,"until_ms":null\}'
	run -0 --separate-stderr rlock -k dh --reset
	assert_regex "$stderr" '^rlock: reset rlock:\{dh\}: cleared the --once-per mark of fence \? \(it had no expiry: set by hand\?\)$'
	key_absent 'rlock:{dh}:done'
	run -0 rlock -k dh --once-per 1h -- touch ran
	[[ -e ran ]]
	run -0 --separate-stderr rlock -k dh --history
	assert_regex "$output" 'reset .* cleared once-per'
}

@test "--once-per: in the config file; refused where it cannot hold (64)" {
	printf 'once-per = 1h\n' >cfg
	run -0 rlock --config cfg -k op -- true
	key_exists 'rlock:{op}:done'
	run -75 rlock --config cfg -k op -- true
	# --once-per 0 on the command line lifts the config file's
	run -0 rlock --config cfg --once-per 0 -k op -- true
	# the config file's value does not bother the other modes
	run -0 rlock --config cfg -k other --status
	local bad
	for bad in '-s' '-l 2' '-k other' '-u redis://127.0.0.1:1 -u redis://127.0.0.1:2 -u redis://127.0.0.1:3'; do
		# shellcheck disable=SC2086  # the options split on purpose
		run -64 --separate-stderr rlock --once-per 1h -k op $bad -- true
		assert_one_line_error
		assert_regex "$stderr" '--once-per'
	done
	run -64 --separate-stderr rlock --once-per 1h -k op -s --acquire
	assert_one_line_error
	assert_regex "$stderr" '--once-per'
	run -64 --separate-stderr rlock --once-per soon -k op -- true
	assert_one_line_error
}

@test "recipe: the --once-per crontab line of docs/production.md, run as written" {
	local line
	line=$(awk '/^<!-- recipe:once-per/ { f = 1; next } f && /^```/ { if (f == 2) exit; f = 2; next } f == 2 { print }' \
		"$RLOCK_SOURCE_DIR/docs/production.md")
	[[ $line == *'--once-per 1h'* ]] || fail "no once-per recipe in docs/production.md: '$line'"
	# the command of the crontab line: the five time fields dropped, the job a stub
	line=$(printf '%s\n' "$line" | sed -E 's/^([^ ]+ +){5}//; s#/usr/local/bin/report.sh#./report.sh#')
	printf '#!/bin/sh\necho ran >>runs\nexit "${FAIL:-0}"\n' >report.sh
	chmod +x report.sh
	mkdir -p bin
	ln -sf "$RLOCK" bin/rlock
	# a failed tick marks nothing: the next retries; after a success, ticks skip silently
	run -3 env PATH="$PWD/bin:$PATH" FAIL=3 sh -c "$line"
	key_absent 'rlock:{hourly-report}:done'
	run -0 env PATH="$PWD/bin:$PATH" sh -c "$line"
	run -0 --separate-stderr env PATH="$PWD/bin:$PATH" sh -c "$line"
	[[ -z $stderr ]]
	[[ $(grep -c ran runs) == 2 ]]
	key_exists 'rlock:{hourly-report}:done'
}

@test "--once-per with --fair: the queued acquire checks the mark too" {
	run -0 rlock --fair -k op --once-per 1h -c 'echo ran >>runs'
	run -75 --separate-stderr rlock --fair -k op --once-per 1h -c 'echo ran >>runs'
	assert_regex "$stderr" 'is done for this window'
	[[ $(grep -c ran runs) == 1 ]]
}

@test "--acquire --once-per is refused while the name is done; --release --once-per DUR marks it (the steps succeeded), a plain --release does not (issue 38)" {
	local out
	out=$(rlock -k acq --acquire --once-per 1h) || fail "acquire: $out"
	eval "$out"
	run -0 rlock -k acq --release
	key_absent 'rlock:{acq}:done' # released without --once-per: the steps did not say they succeeded
	out=$(rlock -k acq --acquire --once-per 1h) || fail "acquire: $out"
	eval "$out"
	run -0 --separate-stderr rlock -v -k acq --release --once-per 1h
	assert_regex "$stderr" "lock 'acq' is done for 3600 s \(--once-per\)"
	assert_equal "$(rcli GET 'rlock:{acq}:done')" "$RLOCK_FENCE"
	local ttl
	ttl=$(rcli PTTL 'rlock:{acq}:done')
	((ttl > 3500000 && ttl <= 3600000)) || fail "PTTL $ttl"
	# done: a later --acquire --once-per takes nothing, exits as -E, says when it ends
	run -75 --separate-stderr rlock -k acq --acquire --once-per 1h
	refute_output --partial 'RLOCK_TOKEN='
	assert_regex "$stderr" "lock 'acq' is done for this window"
	run -0 --separate-stderr rlock -k acq --acquire --once-per 1h -E 0
	refute_output --partial 'RLOCK_TOKEN='
	# without --once-per the mark binds nothing
	out=$(rlock -k acq --acquire -n) || fail "acquire: $out"
	eval "$out"
	run -0 rlock -k acq --release
}
