#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the shells the tests start; bats sets $stderr
# A lock across steps: `rlock --acquire` leaves a detached keeper renewing the lock and
# prints RLOCK_KEY/RLOCK_TOKEN/RLOCK_FENCE; `rlock --release` (another process) stops it
# and releases: 0, or 79 when the lock was lost meanwhile (or the token is wrong).

load helpers

setup_file() { common_setup_file --unix; }

setup() {
	common_setup
	# The steps call `rlock` by name, as a CI script does.
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	ln -sf "$RLOCK" "$BATS_TEST_TMPDIR/bin/rlock"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH
}

teardown() {
	local p
	for p in $(rcli HGET 'rlock:{ci}:owner' pid 2>/dev/null) $(cat keeper.pids 2>/dev/null); do
		[[ $p =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$p/comm" 2>/dev/null) == rlock-keeper ]] &&
			kill -KILL "$p" 2>/dev/null
	done
	common_teardown
}

# step NAME SCRIPT: run SCRIPT in a shell process of its own (as one CI step), with
# the variables the previous steps left in vars.sh.
step() {
	local name=$1
	shift
	run --separate-stderr bash -c "touch vars.sh; . ./vars.sh; $1"
	echo "# step $name: status $status, stderr: $stderr" >&3
}

keeper_pid() { rcli HGET 'rlock:{ci}:owner' pid; }

@test "--acquire in one process, --release in another; the keeper renews past several TTLs and is detached" {
	step acquire 'rlock -k ci --acquire -t 2s >vars.sh'
	assert_success
	grep -qx "RLOCK_KEY='rlock:{ci}'; export RLOCK_KEY" vars.sh
	grep -qE "^RLOCK_TOKEN='[0-9a-f]{32}'; export RLOCK_TOKEN$" vars.sh
	grep -qx "RLOCK_FENCE='1'; export RLOCK_FENCE" vars.sh
	local pid t0
	pid=$(keeper_pid)
	echo "$pid" >keeper.pids
	proc_alive "$pid"
	[[ $(cat "/proc/$pid/comm") == rlock-keeper ]]
	[[ $(rcli HGET 'rlock:{ci}:owner' cmd) == '(rlock --acquire keeper)' ]]
	# Detached: its own session, no terminal, stdin/stdout/stderr on /dev/null, and no
	# other fd of ours (only its Redis socket and the syslog socket).
	read -r -a st <"/proc/$pid/stat"
	[[ ${st[5]} == "$pid" ]] || fail "the keeper is not a session leader: sid ${st[5]}"
	[[ ${st[6]} == 0 ]] || fail "the keeper has a controlling terminal: ${st[6]}"
	local fd target
	for fd in 0 1 2; do
		target=$(readlink "/proc/$pid/fd/$fd")
		[[ $target == /dev/null ]] || fail "keeper fd $fd is $target"
	done
	for fd in /proc/"$pid"/fd/*; do
		target=$(readlink "$fd")
		[[ ${fd##*/} -le 2 || $target == socket:* || $target == anon_inode:* ]] ||
			fail "keeper holds ${fd##*/} -> $target"
	done
	# Several TTLs later (renewals every ttl/3), still held by the same token.
	t0=$(now_ms)
	renewed_reset
	wait_until 60 renewed 9 'rlock:{ci}' rcli
	echo "# 9 renewals (3 TTLs) seen in $(($(now_ms) - t0)) ms (ttl 2000 ms)" >&3
	key_exists 'rlock:{ci}'
	[[ $(rcli GET 'rlock:{ci}') == "$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)" ]]
	# A waiter, woken by the release.
	rlock_bg -k ci -w 60s -- true
	wait_until 30 eval '[[ $(waiters ci) == 1 ]]'
	step release 'rlock -k ci --release'
	assert_success
	key_absent 'rlock:{ci}' || [[ $(rcli GET 'rlock:{ci}') != "$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)" ]]
	wait_until 20 not proc_alive "$pid"
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 0 ]] || fail "the waiter exited $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	key_absent 'rlock:{ci}'
}

@test "a SIGKILLed keeper lets the lock expire by its TTL; --release then exits 79" {
	step acquire 'rlock -k ci --acquire -t 1s >vars.sh'
	assert_success
	local pid
	pid=$(keeper_pid)
	echo "$pid" >keeper.pids
	kill -KILL "$pid"
	wait_until 20 key_absent 'rlock:{ci}'
	step release 'rlock -k ci --release'
	assert_failure 79
	assert_regex "$stderr" 'not held by this token'
}

@test "a wrong token is refused (79, nothing touched); a malformed one is a usage error (64)" {
	step acquire 'rlock -k ci --acquire >vars.sh'
	assert_success
	local pid tok
	pid=$(keeper_pid)
	echo "$pid" >keeper.pids
	tok=$(rcli GET 'rlock:{ci}')
	step wrong 'rlock -k ci --release --token 0123456789abcdef0123456789abcdef'
	assert_failure 79
	[[ $(rcli GET 'rlock:{ci}') == "$tok" ]] || fail "a wrong token released the lock"
	proc_alive "$pid" || fail "a wrong token stopped the keeper"
	step malformed "rlock -k ci --release --token \"x'; rm -rf /\""
	assert_failure 64
	step notoken 'unset RLOCK_TOKEN; rlock -k ci --release'
	assert_failure 64
	step right 'rlock -k ci --release'
	assert_success
	key_absent 'rlock:{ci}'
}

@test "--acquire: busy (-n) exits 75 and prints nothing; --format github; the keeper's --max-hold" {
	rcli SET 'rlock:{ci}' other PX 600000 >/dev/null
	run -75 --separate-stderr rlock -k ci --acquire -n
	[[ -z $output ]] || fail "printed: $output"
	assert_regex "$stderr" 'busy'
	rcli DEL 'rlock:{ci}' >/dev/null
	# GitHub Actions: KEY=VALUE lines for $GITHUB_ENV; the keeper releases at --max-hold.
	run -0 --separate-stderr rlock -k ci --acquire --format github --max-hold 1s --log-file "$PWD/k.log"
	assert_line --index 0 'RLOCK_KEY=rlock:{ci}'
	assert_line --index 1 --regexp '^RLOCK_TOKEN=[0-9a-f]{32}$'
	assert_line --index 2 'RLOCK_FENCE=1'
	((${#lines[@]} == 3))
	keeper_pid >keeper.pids
	wait_until 30 key_absent 'rlock:{ci}'
	wait_until 20 grep -q 'max-hold is over' k.log
	RLOCK_TOKEN=${lines[1]#RLOCK_TOKEN=} run -79 rlock -k ci --release
}
