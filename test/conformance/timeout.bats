#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Conformance with timeout(1), for --max-hold ("stop the command after DUR as
# timeout(1) does"): every case of GNU coreutils' own timeout tests (tests/timeout/:
# timeout.sh, timeout-parameters.sh, timeout-large-parameters.sh, timeout-group.sh,
# timeout-blocked.pl, init-parent.sh; coreutils commit aa0c0de3) that can apply to
# rlock, as a test of rlock against a real redis-server: `timeout [-k K] DUR CMD`
# is `rlock --max-hold DUR [--kill-after K] -k NAME -- CMD`, with the same expected
# outcome. The scenarios and outcomes are carried over; the tests are this project's
# own. Where rlock deliberately differs, docs/compatibility.md ("Differences from flock(1) and
# timeout(1)") says so and why, and the test checks rlock's side.
#
# Upstream cases that cannot apply (each listed once, with the reason):
# - timeout.sh `--preserve-status`: rlock has no such option; a command stopped by
#   --max-hold gives 124 (or 137), as timeout without it does.
# - timeout.sh `--foreground -s0 -k1`: rlock has one mode; it always signals the
#   command's whole process group and still hands it the terminal (terminal.bats), so
#   the case is the `-k` one below (137 once SIGKILL was needed).
# - timeout.sh and timeout-group.sh `-s SIGNAL` (`-s0`, `-sUSR1`, `-sALRM`) and
#   timeout-parameters.sh `--signal=invalid`: --max-hold always sends SIGTERM (then
#   SIGCONT, then SIGKILL after --kill-after); there is no signal to choose. Signal 0
#   ("send nothing, then SIGKILL") is played by a command that ignores SIGTERM; a bad
#   signal name is tested on rlock's options that take one (--on-lost, --warn).
# - timeout-group.sh's cascade is triggered with `kill -ALRM` (timeout's own timer
#   signal); rlock's timers are not signals, so the outer rlock's own --max-hold
#   triggers it below.
# - timeout-parameters.sh `1e-10000`, ` -1e-10000`, timeout-large-parameters.sh
#   `2.34e+5d` and `$LDBL_MAX`: exponent notation; rlock's durations are decimal with
#   units (as everywhere in rlock: --ttl, -w, the config file); each is a usage error
#   (64), tested below, and the rounding-up case is tested with a decimal.
# - timeout-large-parameters.sh `$UINT_OFLOW`, `${TIME_T_OFLOW}d`: rlock refuses a
#   duration over 100 years (64) instead of clamping it; tested below, with the
#   largest it accepts.

load ../helpers

setup_file() { common_setup_file --unix; }

# ignores_term: a command that ignores SIGTERM (as `timeout -s0` sends nothing): it
# says so in term.ignored, then sleeps (the sleep inherits the ignored SIGTERM).
IGNORES_TERM='trap "" TERM; touch term.ignored; exec sleep 30'

# ---- timeout.sh

@test "timeout.sh: no timeout: --max-hold 10, 1d, and 0 (no limit) run the command: 0" {
	run -0 rlock --max-hold 10 -k t -- true
	run -0 rlock --max-hold 1d -k t -- true
	run -0 rlock --max-hold 0 -k t -- true
}

@test "timeout.sh: exit status propagation: --max-hold 10 -- sh -c 'exit 2': 2" {
	run -2 rlock --max-hold 10 -k t -- sh -c 'exit 2'
}

@test "timeout.sh: timeout: --max-hold .1 -- sleep 10: 124, the lock released" {
	run -124 --separate-stderr rlock --max-hold .1 -k t -- sleep 10
	key_absent 'rlock:{t}'
}

@test "timeout.sh: kill delay: once SIGKILL was needed the status is 128+KILL (137), not 124" {
	# timeout -s0 -k1 .1 sleep 10: the first signal does not stop it, SIGKILL does.
	# --max-hold 2s: the command has set its trap before SIGTERM comes, also on a slow pass.
	run -137 --separate-stderr rlock --max-hold 2s --kill-after 1 -k t -c "$IGNORES_TERM"
	[[ -e term.ignored ]] || fail "SIGTERM came before the command could ignore it: $stderr"
	key_absent 'rlock:{t}'
}

@test "difference: --kill-after 0 sends SIGKILL at once after SIGTERM (timeout: -k 0 never does): 137" {
	local t0 t1
	t0=$(now_ms)
	run -137 --separate-stderr rlock --max-hold 2s --kill-after 0 -k t -c "$IGNORES_TERM"
	t1=$(now_ms)
	[[ -e term.ignored ]] || fail "SIGTERM came before the command could ignore it: $stderr"
	echo "# stopped $((t1 - t0)) ms after the start (max-hold 2000 ms)" >&3
	(((t1 - t0) < 10000)) || fail "SIGKILL did not follow at once"
}

@test "timeout.sh: a parent that ignores SIGCHLD: rlock still sees its command end: 0" {
	# (trap '' CHLD; exec timeout 10 true); bounded: rlock must exit by itself.
	(
		trap '' CHLD
		exec "$RLOCK" --max-hold 10 -k chld -- true
	) </dev/null >chld.out 2>chld.err 3>&- 4>&- &
	local pid=$!
	track_pid "$pid"
	rlock_wait "$pid" 20 || fail "rlock did not see its command end: $(cat chld.err)"
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{chld}'
}

@test "timeout.sh: a parent that ignores SIGCHLD: --max-hold still stops a hung command: 124" {
	(
		trap '' CHLD
		exec "$RLOCK" --max-hold 0.5 -k chld -- sleep 30
	) </dev/null >chld.out 2>chld.err 3>&- 4>&- &
	local pid=$!
	track_pid "$pid"
	rlock_wait "$pid" 20 || fail "rlock did not end: $(cat chld.err)"
	assert_equal "$RLOCK_STATUS" 124
	key_absent 'rlock:{chld}'
}

@test "timeout.sh: not confused when started with a child already (Bug#9098): no output, 124" {
	local out st=0
	out=$(
		setsid sleep .1 &
		exec "$RLOCK" --max-hold .5 -k t -c 'sleep 2; echo foo' 2>/dev/null
	) || st=$?
	assert_equal "$out" ''
	assert_equal "$st" 124
}

@test "timeout.sh: --verbose: says it sends the signal, then SIGKILL, in that order (-v and --verbose)" {
	local opt
	for opt in -v --verbose; do
		rm -f term.ignored
		run -137 --separate-stderr rlock "$opt" --max-hold 2s --kill-after .1 -k t -c "$IGNORES_TERM"
		[[ -e term.ignored ]] || fail "SIGTERM came before the command could ignore it: $stderr"
		local term kill
		term=$(grep -n 'max-hold is over: sending SIGTERM' <<<"$stderr" | cut -d: -f1)
		kill=$(grep -n 'sending SIGKILL' <<<"$stderr" | cut -d: -f1)
		[[ -n $term && -n $kill ]] && ((term < kill)) || fail "$opt: stderr: $stderr"
	done
}

@test "timeout.sh: -v into a closed pipe: rlock is not killed by SIGPIPE, the status is 124" {
	# { timeout -v .1 sleep 10 2>&1; echo $? >timeout.status; } | : -- without the race
	# of `:` exiting before or after the first line: stderr is a pipe whose reader is
	# already gone.
	run -124 perl -e 'pipe(my $r, my $w) or die; close $r; open STDERR, ">&", $w or die;
		exec @ARGV or exit 127' "$RLOCK" -v --max-hold .1 -k t -- sleep 10
}

@test "timeout.sh: an ignored SIGPIPE is not caught for the command: yes | : says Broken pipe" {
	run -0 bash -c '(trap "" PIPE && "$1" -k t -- yes | :) 2>&1 | grep -c "Broken pipe"' _ "$RLOCK"
}

# ---- timeout-parameters.sh

@test "timeout-parameters.sh: invalid durations are usage errors, one line: 64 (timeout: 125)" {
	local d
	for d in invalid ' -0.1' ' -1e-10000' 42D 1e-10000; do
		run -64 --separate-stderr rlock --max-hold "$d" -k t -- true
		assert_one_line_error
	done
	run -64 --separate-stderr rlock --kill-after=invalid --max-hold 1 -k t -- true
	assert_one_line_error
}

@test "timeout-parameters.sh: fractions: 10.34 and 9.999999999 run the command: 0" {
	run -0 rlock --max-hold 10.34 -k t -- true
	run -0 rlock --max-hold 9.999999999 -k t -- true
}

@test "timeout-parameters.sh: a duration below the clock's step rounds up, not to 0 (no limit): 124" {
	# timeout 1e-10000 sleep 10 rounds up to 1 ns; rlock's step is 1 ms.
	run -124 --separate-stderr rlock --max-hold 0.0000000001 -k t -- sleep 10
}

@test "timeout-parameters.sh: a bad signal name is a usage error: 64 (timeout: 125)" {
	run -64 --separate-stderr rlock --on-lost invalid -k t -- true
	assert_one_line_error
	run -64 --separate-stderr rlock --warn invalid -k t -- true
	assert_one_line_error
}

@test "timeout-parameters.sh: a command that cannot be invoked: 126; not found: 127" {
	run -126 --separate-stderr rlock --max-hold 10 -k t -- .
	run -127 --separate-stderr rlock --max-hold 10 -k t -- no_such
	key_absent 'rlock:{t}'
}

# ---- timeout-large-parameters.sh

@test "timeout-large-parameters.sh: the largest duration does not fire at once; larger ones: 64" {
	# timeout clamps an overflowing duration; rlock takes up to 100 years and refuses more.
	run -0 rlock --max-hold 36525d -k t -- sleep 0.5
	local d
	for d in 4294967296 9223372036854775808d 2.34e+5d 1.189731495357231765e+4932; do
		run -64 --separate-stderr rlock --max-hold "$d" -k t -- true
		assert_one_line_error
	done
	run -64 --separate-stderr rlock --max-hold -1.189731495357231765e+4932 -k t -- true
	assert_one_line_error
}

# ---- timeout-blocked.pl

@test "timeout-blocked.pl: a parent that blocks SIGALRM: --max-hold .1 -- sleep 10 still stops it: 124" {
	run -124 --separate-stderr perl -MPOSIX -e \
		'sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGALRM)) or die; exec @ARGV or exit 127' \
		"$RLOCK" --max-hold .1 -k t -- sleep 10
}

# ---- init-parent.sh

@test "init-parent.sh: rlock as the first process of a new pid namespace: --max-hold works: 124" {
	unshare --pid --fork --map-root-user true 2>/dev/null ||
		ci_skip "unshare --pid --fork --map-root-user is unavailable"
	run -124 --separate-stderr unshare --pid --fork --map-root-user \
		"$RLOCK" --max-hold .1 -k t -- sleep 10
	key_absent 'rlock:{t}'
}

# ---- timeout-group.sh

# usr1_cmd: the command of timeout-group.sh: on USR1 it records it and exits 0;
# otherwise it runs (at most 20 s).
USR1_CMD='trap "touch sig.received; exit 0" USR1; echo $$ >cmd.pid; touch cmd.running
	i=0; while [ ! -e sig.received ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done'

@test "timeout-group.sh: a signal to rlock's process group (as Ctrl-C would) reaches the command; rlock ends" {
	rlock_bg --pgrp --max-hold 25 -k g -c "$USR1_CMD"
	wait_until 30 test -e cmd.running
	track_pidfile cmd.pid
	kill -USR1 -- "-$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20
	[[ -e sig.received ]] || fail "the command did not get SIGUSR1"
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{g}'
}

@test "timeout-group.sh: rlock SIGKILLed: the command does not go on running" {
	# timeout's child gets its signal through PR_SET_PDEATHSIG; rlock's command gets
	# SIGKILL (its guard, the watchdog, kills the group): it cannot catch it.
	rlock_bg --max-hold 25 -k g -c "$USR1_CMD"
	wait_until 30 test -e cmd.running
	track_pidfile cmd.pid
	kill -KILL "$RLOCK_PID"
	wait_until 20 pidfile_gone cmd.pid
}

@test "timeout-group.sh: cascaded: an outer --max-hold stops an inner rlock, which stops its command: 124" {
	local t0 t1
	t0=$(now_ms)
	# 3 s: both rlocks and the command's trap are up before the outer limit, on a slow
	# pass too; the inner limit (25 s) is far beyond the bound checked below.
	run -124 --separate-stderr rlock --max-hold 3s -k outer -- \
		"$RLOCK" --max-hold 25 -k inner -c "${USR1_CMD/USR1/TERM}"
	t1=$(now_ms)
	[[ -e sig.received ]] || fail "the innermost command did not get the signal: $stderr"
	echo "# the cascade ended after $((t1 - t0)) ms" >&3
	(((t1 - t0) < 20000)) || fail "the command got the signal only after it ended by itself"
	key_absent 'rlock:{outer}'
	key_absent 'rlock:{inner}'
}
