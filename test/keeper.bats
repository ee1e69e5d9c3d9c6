#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: for the shells the tests start; bats sets $stderr; each test sets XDG_RUNTIME_DIR for itself
# A lock across steps: `rlock --acquire` leaves a detached keeper renewing the lock and
# prints RLOCK_KEY/RLOCK_TOKEN/RLOCK_FENCE (or, when the lock is not held, the line that
# gives eval rlock's status); `rlock --release` (another process) stops it and releases
# in the holder's mode: 0, or 79 when the lock was lost meanwhile (or the token is wrong).

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
	# a test's full tmpfs (full_runtime_dir)
	# (lazily: a keeper just killed may still hold its log file there)
	[[ -z ${FULL_MNT:-} ]] || umount "$FULL_MNT" 2>/dev/null || umount -l "$FULL_MNT" 2>/dev/null || true
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
	wait_until 20 proc_gone "$pid"
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

@test "--acquire: busy (-n) exits 75 and prints the line that gives eval 75; --format github; the keeper's --max-hold" {
	rcli SET 'rlock:{ci}' other PX 600000 >/dev/null
	run -75 --separate-stderr rlock -k ci --acquire -n
	assert_output 'unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit 75)'
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

# sem_keeper TOKEN: the pid of the keeper holding a shared lock or a permit of ci.
sem_keeper() {
	rcli HGET 'rlock:{ci}:meta' "$1" | sed -n 's/.*"pid":"\([0-9]*\)".*/\1/p'
}
# token_of FILE: RLOCK_TOKEN in an --acquire output.
token_of() { sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" "$1"; }

@test "eval \"\$(rlock --acquire)\" carries rlock's status under set -e in bash and dash: busy, -E, usage, unavailable; success sets the variables" {
	require_tool dash
	rcli SET 'rlock:{ci}' other PX 600000 >/dev/null
	local sh
	for sh in bash dash; do
		# Busy: eval returns 75, set -e stops before the next command.
		run -75 --separate-stderr "$sh" -c 'set -e; eval "$(rlock -k ci -n --acquire)"; echo RAN'
		refute_output --partial RAN
		assert_regex "$stderr" 'busy'
		run -75 "$sh" -c 'eval "$(rlock -k ci -n --acquire)" || exit; echo RAN'
		refute_output --partial RAN
		run -3 "$sh" -c 'set -e; eval "$(rlock -k ci -n -E 3 --acquire)"; echo RAN'
		refute_output --partial RAN
		# -E 0 skips with status 0, and no RLOCK_TOKEN (not even one from before) may
		# claim the lock: the steps that need it test for it.
		run -0 "$sh" -c 'set -e; RLOCK_TOKEN=stale; eval "$(rlock -k ci -n -E 0 --acquire)"
			echo "token=${RLOCK_TOKEN-unset}"'
		assert_output 'token=unset'
		# A usage error (found before the keeper is forked) and an unreachable server.
		run -64 "$sh" -c 'set -e; eval "$(rlock -k ci -n --acquire -t nonsense)"; echo RAN'
		refute_output --partial RAN
		run -69 "$sh" -c "set -e; eval \"\$(rlock -k ci -n --acquire -u redis://127.0.0.1:$(dead_port))\"; echo RAN"
		refute_output --partial RAN
	done
	# An interactive shell stays: the status is set by a subshell's exit.
	run -0 --separate-stderr bash --norc -i -c 'eval "$(rlock -k ci -n --acquire)"; echo "still here, $?"'
	assert_output 'still here, 75'
	# --format github prints nothing on a failure ($GITHUB_ENV gets no line).
	run -75 --separate-stderr rlock -k ci -n --acquire --format github
	[[ -z $output ]] || fail "printed: $output"
	# Success, then release, in dash: the variables are set, the output as before.
	rcli DEL 'rlock:{ci}' >/dev/null
	run -0 --separate-stderr dash -c 'set -e; eval "$(rlock -k ci -n --acquire)"
		echo "$RLOCK_KEY $RLOCK_FENCE $RLOCK_TOKEN" >held; rlock -k ci --release; echo released'
	assert_output 'released'
	grep -qE '^rlock:\{ci\} [0-9]+ [0-9a-f]{32}$' held || fail "variables: $(cat held)"
	key_absent 'rlock:{ci}'
}

@test "a waiting --acquire killed by SIGTERM prints (exit 143) for eval and dies of it" {
	rcli SET 'rlock:{ci}' other PX 600000 >/dev/null
	rlock_bg -k ci -w 60s --acquire
	wait_until 30 eval '[[ $(waiters ci) == 1 ]]'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 143 ]] || fail "exited $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	run -143 bash -c 'eval "$(cat "$1")"' _ "$RLOCK_OUT"
	[[ $(rcli GET 'rlock:{ci}') == other ]]
}

@test "--release of a keeper taken with -s or -l 2 releases that holder at once (no -s/-l needed); a token that holds nothing: 79, nothing touched" {
	local kind t1 t2 k1 k2
	for kind in '-s' '-l 2'; do
		rcli FLUSHALL >/dev/null
		step acquire1 "rlock -k ci $kind --acquire >v1.sh"
		assert_success
		step acquire2 "rlock -k ci $kind --acquire >v2.sh"
		assert_success
		t1=$(token_of v1.sh) t2=$(token_of v2.sh)
		k1=$(sem_keeper "$t1") k2=$(sem_keeper "$t2")
		echo "$k1 $k2" >>keeper.pids
		proc_alive "$k1" && proc_alive "$k2"
		# The token alone: released in the holder's mode, its keeper stopped.
		step release1 ". ./v1.sh; rlock -k ci --release"
		assert_success
		zset_lacks 'rlock:{ci}:holders' "$t1" || fail "$kind: $t1 still holds"
		[[ -n $(rcli ZSCORE 'rlock:{ci}:holders' "$t2") ]] || fail "$kind: the other holder is gone"
		wait_until 20 proc_gone "$k1"
		if [[ $kind == '-l 2' ]]; then
			# Its permit is free now, not at the end of its TTL.
			run -0 rlock -k ci -l 2 -n -- true
		fi
		# Released already: the token holds nothing; nothing is touched, no keeper stopped.
		step again ". ./v1.sh; rlock -k ci --release"
		assert_failure 79
		assert_regex "$stderr" 'not held by this token'
		[[ -n $(rcli ZSCORE 'rlock:{ci}:holders' "$t2") ]] || fail "$kind: 79 touched the other holder"
		proc_alive "$k2" || fail "$kind: a token that holds nothing stopped the other keeper"
		# With the mode given explicitly, as before.
		step release2 ". ./v2.sh; rlock -k ci $kind --release"
		assert_success
		wait_until 20 proc_gone "$k2"
		[[ $(rcli EXISTS 'rlock:{ci}:holders') == 0 ]] || fail "$kind: holders left"
	done
}

@test "a keeper keeps no inherited descriptor, even fd 1500: the reader of that pipe sees its end when --acquire exits" {
	(($(ulimit -n) > 1500)) || ulimit -n 2048 || ci_skip "cannot open fd 1500 (ulimit -n)"
	mkfifo log.fifo
	cat log.fifo >log.out &
	local reader=$! pid
	track_pid "$reader"
	step acquire 'exec 1500>log.fifo; echo before >&1500; rlock -k ci --acquire >vars.sh'
	assert_success
	pid=$(keeper_pid)
	echo "$pid" >keeper.pids
	# The step's shell has exited: the keeper was the only writer left.
	wait_until 20 proc_gone "$reader" || fail "the keeper holds fd 1500: $(readlink "/proc/$pid/fd/1500")"
	grep -qx before log.out
	proc_alive "$pid" || fail "the keeper is gone"
	[[ ! -e /proc/$pid/fd/1500 ]]
	step release 'rlock -k ci --release'
	assert_success
	wait_until 20 proc_gone "$pid"
}

@test "--release of a permit that a status read does not list (more than 32 holders): released (0); a token holding nothing there: 79, nothing touched" {
	step acquire 'rlock -k ci -l 40 -t 10m --acquire >vars.sh'
	assert_success
	local tok pid now i
	tok=$(token_of vars.sh)
	pid=$(sem_keeper "$tok")
	echo "$pid" >keeper.pids
	# 33 permits whose leases end before the keeper's: a status read lists those.
	now=$(rcli TIME | head -1)
	for i in $(seq 10 42); do
		rcli ZADD 'rlock:{ci}:holders' $((now * 1000 + 300000)) "0123456789abcdef0123456789abcd$i" >/dev/null
	done
	run -75 rlock -k ci --status --json
	[[ $output == *'"holder_count":34'* && $output != *"\"pid\":$pid"* ]] ||
		fail "the status lists the keeper: the test is void: $output"
	step nothing 'rlock -k ci --release --token fedcba9876543210fedcba9876543210'
	assert_failure 79
	[[ $(rcli ZCARD 'rlock:{ci}:holders') == 34 ]] || fail "a token holding nothing touched the permits"
	step release 'rlock -k ci --release'
	assert_success
	zset_lacks 'rlock:{ci}:holders' "$tok" || fail "the keeper's permit is still held"
	[[ $(rcli ZCARD 'rlock:{ci}:holders') == 33 ]] || fail "other permits touched"
}

@test "--acquire whose output nobody reads (a closed pipe) gives the lock back and exits 74, not killed by SIGPIPE with the lock held" {
	# stdout: a pipe whose read end is closed, so every write fails at once.
	run -74 --separate-stderr perl -e 'pipe(my $r, my $w) or die; close $r;
		open(STDOUT, ">&", $w) or die; exec @ARGV or die' \
		"$RLOCK" -k ci --acquire -v --log-file "$PWD/k.log"
	assert_regex "$stderr" 'cannot write to standard output'
	wait_until 20 key_absent 'rlock:{ci}'
	wait_until 20 grep -q 'keeper pid' k.log
	local pid
	pid=$(sed -n 's/.*keeper pid \([0-9]*\) holds.*/\1/p' k.log)
	echo "$pid" >keeper.pids
	wait_until 20 proc_gone "$pid"
}

@test "--held in a later step after the keeper gave the lock up at --max-hold: 79 with the reason and the time, with Redis stopped too" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire --max-hold 2s --log-file "$PWD/k.log" >vars.sh'
	((status == 0))
	keeper_pid >keeper.pids
	step held 'rlock --held'
	((status == 0))
	wait_until 30 grep -q 'max-hold is over' k.log
	wait_until 10 pidfile_gone keeper.pids # its record is written before it exits
	step held 'rlock --held'
	((status == 79))
	[[ $stderr == *"given up by its keeper at --max-hold at 20"* ]]
	kill -STOP "$REDIS_PID"
	step held-redis-stopped 'rlock --held --io-timeout 500ms'
	kill -CONT "$REDIS_PID"
	((status == 79)) # the keeper's record answers, not Redis (69)
	[[ $stderr == *"--max-hold"* ]]
	# a server that refuses the connection (down, not paused): the record answers too
	step held-redis-down "rlock --held --json -u redis://127.0.0.1:$(dead_port)"
	((status == 79))
	[[ $stderr == *"given up by its keeper at --max-hold"* ]]
	[[ $output == '{"schema":1,"key":"rlock:{ci}","held":false,"ttl_left_ms":null,"fence":null}' ]]
	step release 'rlock -k ci --release'
	((status == 79))
	[[ $stderr == *"given up by its keeper at --max-hold"* ]]
	[[ -z $(ls -A "$XDG_RUNTIME_DIR/rlock") ]] # --release removed the record
}

@test "a keeper told to release (SIGTERM) whose release fails (Redis paused): its record says given up, the release failed, not 'released'" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 5s --io-timeout 300ms --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	kill -STOP "$REDIS_PID"
	kill -TERM "$(cat keeper.pids)"
	wait_until 10 pidfile_gone keeper.pids # its record is written before it exits
	step held 'rlock --held --connect-timeout 300ms --io-timeout 300ms'
	kill -CONT "$REDIS_PID"
	assert_failure 79
	# main (s63-h5): "released by its keeper on SIGTERM", while its log said it could not
	assert_regex "$stderr" 'given up by its keeper on SIGTERM \(its release failed: unless the server got the release \(its reply lost\), it expires by its TTL\) at '
}

@test "--acquire with a relative --log-file, --events and --metrics-file: resolved in the caller's directory, not in the keeper's /" {
	local n=rlock-test-keeper-$$-$RANDOM
	mkdir sub
	step acquire "cd sub && rlock -k ci --acquire -v --log-file $n.log --events $n.jsonl --metrics-file $n.prom >../vars.sh"
	local root_log=0
	[[ ! -e /$n.log ]] || root_log=1
	rm -f "/$n.log" "/$n.jsonl" "/$n.prom" "/$n.prom.lock" # an old binary wrote there
	((status == 0)) || fail "--acquire exited $status: $stderr"
	keeper_pid >keeper.pids
	((root_log == 0)) || fail "the keeper wrote its log to /$n.log"
	wait_until 20 grep -q 'keeper pid' "sub/$n.log"
	wait_until 20 grep -q '"event":"keeper-started"' "sub/$n.jsonl"
	step release 'rlock -k ci --release'
	((status == 0)) || fail "--release exited $status: $stderr"
	wait_until 20 pidfile_gone keeper.pids
	wait_until 20 grep -q 'SIGUSR1' "sub/$n.log"
	wait_until 20 grep -q '^rlock_' "sub/$n.prom"
	[[ ! -e /$n.log && ! -e /$n.jsonl && ! -e /$n.prom ]]
}

@test "--release after its keeper declared the lock lost while the lease still ran on the server: given back, but 79, as --held says (explorer: seed 834802819 round 10)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 3s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	# The keeper's renewals are refused (no script may run), so it cannot confirm one and
	# gives the lock up by its own clock; the lease itself runs on (made long here, as it
	# is for the last fifth of a TTL after a loss decided at 4/5).
	rcli ACL SETUSER default -evalsha -eval -evalsha_ro -eval_ro >/dev/null
	rcli PEXPIRE 'rlock:{ci}' 60000 >/dev/null
	rcli PEXPIRE 'rlock:{ci}:owner' 60000 >/dev/null
	wait_until 30 grep -q 'the keeper exits' k.log
	wait_until 10 pidfile_gone keeper.pids # its record is written before it exits
	rcli ACL SETUSER default +@all >/dev/null
	[[ -n $(rcli GET 'rlock:{ci}') ]] || fail "the lease was meant to run on"
	step held 'rlock --held'
	assert_failure 79
	step release 'rlock -k ci --release'
	assert_failure 79 # main: 0, as if the keeper had guarded the job to the end
	assert_regex "$stderr" 'lost by its keeper'
	key_absent 'rlock:{ci}' # given back all the same
	# the run's end record agrees with 79: lost, not released (layers' merge: released)
	run -0 rlock -k ci --history --json
	echo "$output" | jq -e '[.entries[] | select(.event != "acquired")] |
		length == 1 and .[0].event == "lost"' >/dev/null ||
		fail "$(echo "$output" | jq -c '[.entries[] | [.event, .fence, .status]]')"
}

@test "--release --once-per after its keeper declared the lock lost: 79, and the name is not marked done (a later --once-per run runs)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 3s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	# as above: the keeper gives the lease up by its own clock, the lease runs on
	rcli ACL SETUSER default -evalsha -eval -evalsha_ro -eval_ro >/dev/null
	rcli PEXPIRE 'rlock:{ci}' 60000 >/dev/null
	rcli PEXPIRE 'rlock:{ci}:owner' 60000 >/dev/null
	wait_until 30 grep -q 'the keeper exits' k.log
	wait_until 10 pidfile_gone keeper.pids
	rcli ACL SETUSER default +@all >/dev/null
	[[ -n $(rcli GET 'rlock:{ci}') ]] || fail "the lease was meant to run on"
	step release 'rlock -k ci --release --once-per 1h'
	assert_failure 79
	key_absent 'rlock:{ci}' # given back all the same
	# 79 is never a success: the steps ran unguarded, nothing marks them done
	key_absent 'rlock:{ci}:done' || fail "marked done by a release that exits 79"
	run -0 rlock -k ci -n --once-per 1h -- true
}

@test "--release of a run whose token also opened an earlier run (a late grant given back, then taken again): that run's end is not this one's (explorer: seed 602239655 round 1)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 30s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	local tok fence
	tok=$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)
	fence=$(sed -n "s/^RLOCK_FENCE='\(.*\)'.*/\1/p" vars.sh)
	# The history as an --acquire leaves it when its first grant's reply came too late
	# for the lease: that grant given back (released), the same token's next attempt
	# granted (the run that ran), oldest first.
	rcli DEL 'rlock:{ci}:history' >/dev/null
	rcli XADD 'rlock:{ci}:history' '*' ev acquired fence "$((fence - 1))" token "$tok" \
		host h pid 1 user u label '' >/dev/null
	rcli XADD 'rlock:{ci}:history' '*' ev released fence "$((fence - 1))" token "$tok" \
		host h pid 1 label '' status 0 >/dev/null
	rcli XADD 'rlock:{ci}:history' '*' ev acquired fence "$fence" token "$tok" \
		host h pid 1 user u label '' >/dev/null
	# ... and that run's lease ran out unrenewed (the server stopped): no end recorded.
	rcli DEL 'rlock:{ci}' 'rlock:{ci}:owner' >/dev/null
	step release 'rlock -k ci --release'
	assert_failure 79
	# main: "it was already released at ... (a --release before this one)", the end of
	# the given-back grant, the same token's earlier run
	refute_regex "$stderr" 'already released'
	assert_regex "$stderr" "lock 'ci' is not held by this token: it was lost \(expired, broken or taken over\) since --acquire"
}

@test "--release that cannot reach Redis (69, \"it expires by its TTL\") stops the keeper all the same: once Redis is back, the lock expires (explorer: seed 803799252 round 34); --held says so with Redis still down (79), a later --release frees it (0)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	# a TTL long enough that the keeper cannot give the lock up by its own clock while
	# the server is stopped (it would then end anyway)
	step acquire 'rlock -k ci --acquire -t 10s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	kill -STOP "$REDIS_PID"
	step release 'rlock -k ci --release --connect-timeout 500ms --io-timeout 500ms'
	local released=$status err=$stderr
	# Redis still down: the keeper's end is known here, as when it gave the lock up
	# (s63-h5: 69, "Redis cannot say", the keeper's mark gone with it)
	step held-down 'rlock --held --connect-timeout 300ms --io-timeout 300ms'
	kill -CONT "$REDIS_PID"
	assert_equal "$released" 69
	assert_failure 79
	assert_regex "$stderr" 'is not held by token [0-9a-f]{32}: left to its TTL by rlock --release \(its keeper stopped\), which could not release it \(.*\) at '
	assert_regex "$err" 'expires by its TTL; the keeper is stopped$'
	# main: the keeper renewed on once the server was back; the lock never expired
	wait_until 10 pidfile_gone keeper.pids ||
		fail "the keeper still runs after --release said the lock expires by its TTL: $(cat k.log)"
	key_exists 'rlock:{ci}'
	# the release retried: given back (0), not 79 "lost": the steps were guarded
	step release-again 'rlock -k ci --release'
	assert_success
	key_absent 'rlock:{ci}'
	step held 'rlock --held'
	assert_failure 79
}

@test "--release whose connection is refused at once (69) stops the keeper all the same: the lock expires (explorer: seed 1712401040 round 10)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 3s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	local port
	port=$(free_port)
	# from a shell of another runtime directory (no mark of the keeper there, nor the
	# server's record to find it by): it renews on, and the line must not say the
	# lock expires (s63-h5: "it expires by its TTL")
	step elsewhere "XDG_RUNTIME_DIR=\$PWD/rt2 rlock -u redis://127.0.0.1:$port -k ci --release"
	assert_failure 69
	assert_equal "$stderr" "rlock: cannot release 'ci' (connect to 127.0.0.1:$port: Connection refused): no keeper of it stopped on this host (no record of its keeper in $PWD/rt2/rlock): one that runs renews it; run --release again once Redis answers"
	pidfile_alive keeper.pids || fail "the keeper was stopped"
	# nothing listens there: the connection fails before any request
	step release "rlock -u redis://127.0.0.1:$port -k ci --release"
	assert_failure 69
	# one line: what failed (the endpoint) and what follows
	assert_equal "$stderr" "rlock: cannot release 'ci' (connect to 127.0.0.1:$port: Connection refused): it expires by its TTL; the keeper is stopped"
	# main: said only "connect to ...: Connection refused"; the keeper renewed on
	wait_until 10 pidfile_gone keeper.pids ||
		fail "the keeper still runs after --release exited 69: $(cat k.log)"
	wait_until 30 key_absent 'rlock:{ci}'
}

@test "--acquire --log-file: a FIFO nobody reads, a link planted at its name, another user's file: 66 at once, before the lock is taken (issue 33)" {
	mkfifo log.fifo
	echo 'precious' >victim
	ln -s "$PWD/victim" planted.log
	local log
	for log in log.fifo planted.log; do
		# -k: on a keeper blocked in open() the caller would wait for ever.
		run --separate-stderr timeout -k 5 30 "$RLOCK" -k ci --acquire --log-file "$PWD/$log"
		# Whatever blocks opening the FIFO for writing is let go (a reader comes).
		[[ $log != log.fifo ]] || timeout 5 cat log.fifo >/dev/null || true
		assert_equal "$status" 66
		assert_output 'unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit 66)'
		assert_one_line_error
		assert_regex "$stderr" "cannot open the keeper's log file '.*$log': is (a FIFO that nobody reads|a symbolic link)"
		key_absent 'rlock:{ci}' || fail "$log: the lock was taken"
	done
	[[ $(cat victim) == precious ]]
	if ((EUID == 0)); then
		: >other.log && chown nobody other.log
		run -66 --separate-stderr timeout -k 5 30 "$RLOCK" -k ci --acquire --log-file "$PWD/other.log"
		assert_regex "$stderr" "other.log': belongs to another user"
		[[ ! -s other.log ]]
	fi
}

# ends_of TOKEN: the end records of TOKEN's runs in the history of ci, oldest first, one
# event per line (none: nothing).
ends_of() {
	rlock -k ci --history --json |
		jq -r --arg t "$1" '[.entries[] | select(.token == $t and .event != "acquired")] |
			reverse | .[].event'
}

@test "a keeper whose lock was deleted records its run lost, once: --release (79) adds nothing, the next grant finds no open run to call expired" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 3s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	local tok
	tok=$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)
	rcli DEL 'rlock:{ci}' >/dev/null
	wait_until 30 grep -q 'the keeper exits' k.log
	wait_until 10 pidfile_gone keeper.pids
	assert_equal "$(ends_of "$tok")" lost # main: none, the run left open
	step release 'rlock -k ci --release'
	assert_failure 79
	# one line: the keeper's own account of the loss
	assert_regex "$stderr" "^rlock: lock 'ci' is not held by this token: lost by its keeper \(.*\) at .*; nothing released$"
	run -0 rlock -k ci -- true
	assert_equal "$(ends_of "$tok")" lost # main: expired, by the next grant
}

@test "a keeper whose lock a --release it could not stop (another host) gave back with its token: it says so and exits, not 'lock lost'; --held says released; the run ends once, released; another user's --release says it cannot stop it" {
	[[ $(id -u) == 0 ]] || skip "needs root (a UTS namespace: another host name)"
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 1s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	# the holder record names another host: the keeper is not this one's to stop
	step elsewhere 'unshare --uts sh -c "hostname elsewhere.invalid && exec rlock -k ci --release"'
	assert_success
	wait_until 10 pidfile_gone keeper.pids || fail "the keeper still runs: $(cat k.log)"
	# main (s63-h5): "lock lost: the lock is no longer ours: taken away ... (deleted,
	# evicted or flushed on the server, or its clock jumped)", and --held "lost by its keeper"
	run cat k.log
	refute_output --partial 'lock lost'
	assert_output --partial 'rlock:{ci} was released with its token by an rlock --release at'
	step held 'rlock --held'
	assert_failure 79
	assert_regex "$stderr" 'released with its token by an rlock --release that could not stop its keeper at '
	assert_equal "$(ends_of "$(token_of vars.sh)")" released
	# another user's --release (its token given): the keeper is not its to signal; it
	# says so (it said "no keeper of this lock runs on this host" at -v), and releases
	redis_start # TCP: a server the other user can reach
	step acquire2 'rlock -k ci --acquire -t 1s --log-file "$PWD/k2.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	run --separate-stderr setpriv --reuid=65534 --regid=65534 --clear-groups \
		env HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent XDG_RUNTIME_DIR= \
		"$RLOCK" -k ci --release --token "$(token_of vars.sh)"
	assert_success
	assert_regex "$stderr" "keeper pid [0-9]+ of 'ci' cannot be stopped \(Operation not permitted\): releasing; it finds the lock released at its next renewal"
	wait_until 10 pidfile_gone keeper.pids || fail "the keeper still runs: $(cat k2.log)"
	grep -q 'was released with its token by an rlock --release' k2.log || fail "$(cat k2.log)"
}

@test "a keeper that found its lock not its own recorded the run lost; its --release, finding the lock its own again, frees it and records no second end" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 3s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	local tok
	tok=$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)
	# Not its own for one renewal, then its own again with the lease running on: as a
	# keeper sees a lease it gave up by its own clock that the server still keeps.
	rcli SET 'rlock:{ci}' someone-else KEEPTTL >/dev/null
	wait_until 30 grep -q 'the keeper exits' k.log
	wait_until 10 pidfile_gone keeper.pids
	rcli SET 'rlock:{ci}' "$tok" PX 60000 >/dev/null
	rcli PEXPIRE 'rlock:{ci}:owner' 60000 >/dev/null
	assert_equal "$(ends_of "$tok")" lost
	step release 'rlock -k ci --release'
	assert_failure 79
	assert_regex "$stderr" 'lost by its keeper'
	key_absent 'rlock:{ci}' # given back all the same
	assert_equal "$(ends_of "$tok")" lost # one end record, not two
}

@test "--release of a keeper that died unheard (kill -9) and whose lease is gone: 79, and the run ends lost in the history" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 30s --log-file "$PWD/k.log" >vars.sh'
	assert_success
	keeper_pid >keeper.pids
	local tok
	tok=$(sed -n "s/^RLOCK_TOKEN='\(.*\)'.*/\1/p" vars.sh)
	kill -KILL "$(cat keeper.pids)"
	wait_until 10 pidfile_gone keeper.pids
	rcli DEL 'rlock:{ci}' 'rlock:{ci}:owner' >/dev/null # its lease ran out
	step release 'rlock -k ci --release'
	assert_failure 79
	assert_equal "$(ends_of "$tok")" lost # main: none (then expired, by the next grant)
	step release-again 'rlock -k ci --release'
	assert_failure 79
	assert_equal "$(ends_of "$tok")" lost # once
}

# A signal that reaches --acquire once its keeper holds the lock (reported, the parent
# not yet done): the parent stopped (SIGSTOP) while the keeper takes the lock, then the
# signal, then SIGCONT, so that both wait at once. The keeper used to get the signal as
# is (SIGTERM: it released; SIGUSR1, --release's control: it stopped renewing) while the
# parent printed the variables and exited 0: the steps ran unguarded.
# acquire_stopped_after_grant TTL: an --acquire of h (-t TTL) that waits behind a holder,
# is stopped (SIGSTOP), and whose keeper then takes the lock: $RLOCK_PID the stopped
# --acquire, $KEEPER_PID its keeper (noted in keeper.pids for the teardown).
acquire_stopped_after_grant() {
	start_holder h -t 30s
	rlock_bg -k h -t "$1" -w 60s --acquire
	wait_until 30 eval '[[ $(waiters h) == 1 ]]'
	kill -STOP "$RLOCK_PID"
	touch "$BATS_TEST_TMPDIR/h.release"
	rlock_wait "$HOLDER_PID" 30
	wait_until 30 eval '[[ $(rcli HGET "rlock:{h}:owner" cmd) == "(rlock --acquire keeper)" ]]'
	KEEPER_PID=$(rcli HGET 'rlock:{h}:owner' pid)
	echo "$KEEPER_PID" >>keeper.pids
}

@test "a signal that reaches --acquire after its keeper took the lock: the lock is given back, 128+N for eval, never the variables with 0" {
	make_hold_script
	local sig want
	for sig in TERM USR1; do
		want=$((128 + $(kill -l "$sig")))
		rm -f "$BATS_TEST_TMPDIR"/h.*
		local kp
		acquire_stopped_after_grant 30s
		kp=$KEEPER_PID
		kill "-$sig" "$RLOCK_PID"
		kill -CONT "$RLOCK_PID"
		rlock_wait "$RLOCK_PID" 30
		[[ $RLOCK_STATUS == "$want" ]] ||
			fail "SIG$sig: exited $RLOCK_STATUS ($(cat "$RLOCK_OUT")): $(cat "$RLOCK_ERR")"
		! grep -q RLOCK_TOKEN= "$RLOCK_OUT" || fail "SIG$sig: printed the token: $(cat "$RLOCK_OUT")"
		run "-$want" bash -c 'eval "$(cat "$1")"' _ "$RLOCK_OUT"
		# given back at once (not left to its TTL), and no keeper renews it
		wait_until 10 key_absent 'rlock:{h}'
		wait_until 30 proc_gone "$kp"
	done
}

# The server still has the token (the lease runs out by its TTL), but the keeper on
# this host was killed unheard (kill -9, the OOM killer): nothing renews the lease, so
# `rlock --held && ./publish.sh` would publish under a lock about to end. A nested run
# already refuses such a token (reenter.c); --held said 0.
@test "--held after the keeper was killed unheard (kill -9), its lease still running on the server: 79, the keeper named, with Redis down too; nothing changed" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	step acquire 'rlock -k ci --acquire -t 60s >vars.sh'
	assert_success
	step held-live 'rlock --held'
	assert_success
	local pid
	pid=$(keeper_pid)
	echo "$pid" >keeper.pids
	kill -KILL "$pid"
	wait_until 20 proc_gone "$pid"
	step held 'rlock --held'
	assert_failure 79
	assert_regex "$stderr" "is not held by token [0-9a-f]{32}: its holder \(pid $pid\) is gone and nobody renews its lease"
	[[ $(wc -l <<<"$stderr") == 1 ]] || fail "more than one line: $stderr"
	step held-json 'rlock --held --json'
	assert_failure 79
	[[ $output == '{"schema":1,"key":"rlock:{ci}","held":false,"ttl_left_ms":null,"fence":null}' ]] ||
		fail "json: $output"
	# Redis down: its mark on this host says as much (s63-h5: 69, "Redis cannot say")
	kill -STOP "$REDIS_PID"
	step held-down 'rlock --held --connect-timeout 300ms --io-timeout 300ms'
	local held_status=$status held_err=$stderr
	# and --release says the lock expires by its TTL, its keeper gone (s63-h5's first
	# wording: "no keeper found ... one that runs renews it")
	step release-down 'rlock -k ci --release --connect-timeout 300ms --io-timeout 300ms'
	kill -CONT "$REDIS_PID"
	assert_failure 69
	assert_regex "$stderr" "it expires by its TTL; its keeper is gone \(its pid names another process, or none\)$"
	assert_equal "$held_status" 79
	assert_regex "$held_err" "is not held by token [0-9a-f]{32}: its keeper \(pid $pid\) is gone and nobody renews its lease"
	key_exists 'rlock:{ci}'
	# --release gives back what is left of it: the lock was held all along (0)
	step release 'rlock -k ci --release'
	assert_success
	key_absent 'rlock:{ci}'
}

# The same moment, but --acquire is SIGKILLed (a CI job's group killed at its timeout):
# it never printed the token, so nobody could --release the lock; the keeper renewed it
# for ever. It now waits for --acquire to say it printed, and gives the lock back when
# it ended without saying so.
@test "--acquire SIGKILLed after its keeper took the lock, before it printed the token: the keeper gives the lock back, not kept for ever" {
	make_hold_script
	local kp
	acquire_stopped_after_grant 3s
	kp=$KEEPER_PID
	kill -KILL "$RLOCK_PID"
	# given back (a keeper that kept it renews it every second: it would stay)
	wait_until 20 key_absent 'rlock:{h}'
	wait_until 30 proc_gone "$kp"
}

@test "--release with a running rlock's token (its command's RLOCK_TOKEN), not a keeper's: refused (64), nothing released; the run keeps its lock and ends 0" {
	# The run's own release, retried, is told apart from nothing else by the server
	# (the same token): a --release in its command would free the lock under it
	# unseen, the run then exiting 0 as if it had held it all along.
	local kind tag pid n=0
	for kind in '-x' '-s'; do
		n=$((n + 1)) tag=h$n
		rcli FLUSHALL >/dev/null
		rlock_bg -k ci "$kind" -- sh -c 'rlock -k ci --release 2>rel.err; echo $? >rel.rc; exec "$1" "$2"' sh "$HOLD" "$tag"
		pid=$RLOCK_PID
		wait_until 30 test -e "$tag.started"
		assert_equal "$(cat rel.rc)" 64
		grep -q "held by a running rlock" rel.err || fail "$kind: $(cat rel.err)"
		run -75 rlock -n -k ci -- true
		touch "$tag.release"
		rlock_wait "$pid"
		assert_equal "$RLOCK_STATUS" 0
	done
}

@test "--release -k A takes A's token by its key, not whatever lock RLOCK_TOKEN is: after a later --acquire -k B in the same shell, each released with its own; RLOCK_TOKEN of another lock alone: 64 (not 79 'lost'), A's keeper left holding" {
	eval "$(rlock -k ka --acquire)"
	# shellcheck disable=SC2153 # set by the eval above
	local ka_token=$RLOCK_TOKEN ka_keeper
	ka_keeper=$(rcli HGET 'rlock:{ka}:owner' pid)
	track_pid "$ka_keeper"
	eval "$(rlock -k kb --acquire)"
	track_pid "$(rcli HGET 'rlock:{kb}:owner' pid)"
	assert_equal "$RLOCK_KEYS" 'rlock:{kb} rlock:{ka}'
	# RLOCK_TOKEN alone is kb's: it is no token of ka's, and ka was not lost
	RLOCK_KEYS='' RLOCK_TOKENS='' run -64 --separate-stderr rlock -k ka --release
	assert_regex "$stderr" "RLOCK_TOKEN is the token of rlock:\{kb\} \(RLOCK_KEY\), not of 'ka'"
	assert_equal "$(rcli GET 'rlock:{ka}')" "$ka_token"
	proc_alive "$ka_keeper"
	# with every lock's token listed (as --acquire prints them): each its own
	run -0 rlock -k ka --release
	key_absent 'rlock:{ka}'
	wait_until 20 proc_gone "$ka_keeper"
	run -0 rlock -k kb --release
	key_absent 'rlock:{kb}'
	# the variables of those released are stale: a later --acquire lists none of them
	eval "$(rlock -k kc --acquire)"
	track_pid "$(rcli HGET 'rlock:{kc}:owner' pid)"
	[[ -z ${RLOCK_KEYS+set} ]] || fail "RLOCK_KEYS still set: $RLOCK_KEYS"
	run -0 rlock --held
	run -0 rlock -k kc --release
}

@test "a failed --acquire lists the job's holds the server still has, not stale variables: a released lock is dropped, a held one kept; none left: the lists are unset" {
	# It listed every lock its variables named, without asking the server.
	eval "$(rlock -k fa --acquire)"
	track_pid "$(rcli HGET 'rlock:{fa}:owner' pid)"
	eval "$(rlock -k fb --acquire)"
	track_pid "$(rcli HGET 'rlock:{fb}:owner' pid)"
	assert_equal "$RLOCK_KEYS" 'rlock:{fb} rlock:{fa}'
	run -0 rlock -k fb --release
	rcli SET 'rlock:{fbusy}' 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
	run -75 --separate-stderr rlock -k fbusy -n --acquire
	assert_line "RLOCK_KEYS='rlock:{fa}'; export RLOCK_KEYS"
	refute_output --partial 'rlock:{fb}'
	eval "$output" || true
	assert_equal "$RLOCK_KEYS" 'rlock:{fa}'
	RLOCK_KEY='rlock:{fa}' RLOCK_TOKEN=${RLOCK_TOKENS%% *} run -0 rlock -k fa --release
	run -75 --separate-stderr rlock -k fbusy -n --acquire
	refute_output --partial 'RLOCK_KEYS='
	assert_line --index 0 'unset RLOCK_KEYS RLOCK_TOKENS RLOCK_FENCES'
	rcli DEL 'rlock:{fbusy}' >/dev/null
}

@test "--acquire on another database inside a job keeps the job's hold listed (its server cannot judge a token it never knew): a nested run of the job's lock is re-entrant, not a wait for its own ancestor; a lock released on the --acquire's own server is still dropped" {
	local db1
	if [[ $REDIS_URL == unix://* ]]; then db1="$REDIS_URL?db=1"; else db1="$REDIS_URL/1"; fi
	run -0 rlock -k A -- sh -c '
		eval "$("$RLOCK" -u "$1" -k B -n --acquire)" || exit 9
		"$RLOCK" -u "$1" -k B --release || exit 8
		eval "$("$RLOCK" -u "$1" -k C -n --acquire)" || exit 9
		echo "$RLOCK_KEYS" >keys
		"$RLOCK" -n -k A -- true; echo "nested $?"
		"$RLOCK" -u "$1" -k C --release; echo "release $?"' sh "$db1"
	assert_line 'nested 0'
	assert_line 'release 0'
	# B, released on db 1, is dropped there; A, held on db 0, is kept
	assert_equal "$(cat keys)" 'rlock:{C} rlock:{A}'
	key_absent 'rlock:{A}'
}

@test "--release -k A (and --held -k A) of one database after --acquire -k A on two in one shell: each released with its own token (RLOCK_KEY names both), not 79 'lost' with the other's, its keeper left holding" {
	local db1
	if [[ $REDIS_URL == unix://* ]]; then db1="$REDIS_URL?db=1"; else db1="$REDIS_URL/1"; fi
	eval "$(rlock -u "$db1" -k A -n --acquire)"
	track_pid "$(rcli -n 1 HGET 'rlock:{A}:owner' pid)"
	eval "$(rlock -k A -n --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	assert_equal "$RLOCK_KEYS" 'rlock:{A} rlock:{A}'
	# --held -k A asks each database about its own hold, as --release does
	run -0 rlock -u "$db1" -k A --held
	run -0 rlock -k A --held
	run -0 rlock -u "$db1" -k A --release
	[[ $(rcli -n 1 EXISTS 'rlock:{A}') == 0 ]] || fail "db 1's A still held"
	run -79 rlock -u "$db1" -k A --held
	key_exists 'rlock:{A}'
	run -0 rlock -k A --release
	key_absent 'rlock:{A}'
}

@test "SIGINT or SIGTERM while --release waits for a stopped keeper ends the wait at once: the lock is released all the same, rlock dies of the signal" {
	# The keeper stopped (SIGSTOP) cannot act on --release's SIGUSR1: --release waits
	# for it (up to connect + io timeouts, 30 s here); an operator's Ctrl-C must end
	# that wait, never leave the lock held.
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	local sig kp start
	for sig in INT TERM; do
		eval "$(timeout 20 "$RLOCK" -k "ks$sig" -t 120s --acquire)"
		kp=$(rcli HGET "rlock:{ks$sig}:owner" pid)
		echo "$kp" >>keeper.pids
		kill -STOP "$kp"
		rlock_bg -k "ks$sig" --io-timeout 30s --release
		# --release signalled the keeper: SIGUSR1 (bit 10) is pending in it
		wait_until 20 eval "grep -qE '^ShdPnd:.*[2367abef]..\$' /proc/$kp/status"
		start=$(now_ms)
		kill "-$sig" "$RLOCK_PID"
		rlock_wait "$RLOCK_PID" 10
		echo "# $sig: $(($(now_ms) - start)) ms: $(cat "$RLOCK_ERR")" >&3
		(($(now_ms) - start < 5000)) || fail "the wait for the keeper was not cut short by SIG$sig"
		assert_equal "$RLOCK_STATUS" "$((128 + $(kill -l "$sig")))"
		key_absent "rlock:{ks$sig}"
		kill -CONT "$kp"
		wait_until 20 proc_gone "$kp"
	done
}

@test "a keeper whose mark could not be written (its runtime directory on a full disk): one line tells the --acquire caller and its --log-file, and --release stops it at once, not at its next renewal" {
	# The mark names the keeper to --release; without it the server's holder record
	# (this boot, pid namespace, a keeper started before it took the lock) does.
	[[ $(id -u) == 0 ]] || skip "needs root (a tiny tmpfs)"
	FULL_MNT=$BATS_TEST_TMPDIR/full
	mkdir "$FULL_MNT"
	mount -t tmpfs -o size=64k,mode=700 tmpfs "$FULL_MNT" || {
		FULL_MNT=
		skip "cannot mount a tmpfs here"
	}
	mkdir -m 700 "$FULL_MNT/rlock"
	dd if=/dev/zero of="$FULL_MNT/rlock/fill" bs=4k 2>/dev/null || true
	export XDG_RUNTIME_DIR=$FULL_MNT
	local kp
	eval "$(timeout 20 "$RLOCK" -k ci -t 60s --log-file "$PWD/k.log" --acquire 2>acquire.err)"
	echo "# $(cat acquire.err)" >&3
	# said where the operator who ran --acquire reads it, one line
	assert_equal "$(wc -l <acquire.err)" 1
	assert_regex "$(cat acquire.err)" "cannot record who keeps rlock:\{ci\} in $FULL_MNT/rlock \(No space left on device\)"
	# and in the keeper's log, stamped (s63-h5: the caller's stderr alone had it)
	grep -qE '^[0-9-]+T[0-9:+-]+ rlock\[[0-9]+\]: keeper: cannot record who keeps rlock:\{ci\}' k.log ||
		fail "not in the keeper's log: $(cat k.log)"
	kp=$(keeper_pid)
	[[ $kp =~ ^[0-9]+$ ]]
	echo "$kp" >>keeper.pids
	[[ -z $(find "$FULL_MNT/rlock" -name 'keeper-*' -size +0) ]] || fail "the mark was written"
	run --separate-stderr timeout 20 "$RLOCK" -k ci --release
	echo "# $stderr" >&3
	assert_success
	key_absent 'rlock:{ci}'
	# stopped now, not at its next renewal (20 s away)
	wait_until 5 proc_gone "$kp"
}

@test "a keeper whose runtime directory is not one it may use (open to others): one line says so to the caller and in its log, not silence; --release still stops it" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	mkdir -m 755 "$XDG_RUNTIME_DIR/rlock"
	local kp
	eval "$(timeout 20 "$RLOCK" -k ci -t 60s --log-file "$PWD/k.log" --acquire 2>acquire.err)"
	kp=$(keeper_pid)
	[[ $kp =~ ^[0-9]+$ ]]
	echo "$kp" >>keeper.pids
	# main (s63-h5): nothing said (a -vv line); --held then could not tell the keeper's end
	assert_equal "$(cat acquire.err)" "rlock: keeper: cannot record who keeps rlock:{ci} ($XDG_RUNTIME_DIR/rlock: open to other users (mode 0700 wanted)): --release finds it by the server's record alone, --held cannot tell its end"
	grep -q 'keeper: cannot record who keeps rlock:{ci}' k.log || fail "not in its log: $(cat k.log)"
	run -0 timeout 20 "$RLOCK" -k ci --release
	wait_until 5 proc_gone "$kp"
	key_absent 'rlock:{ci}'
}

@test "a keeper whose --log-file is on a full disk: the lines it cannot write go to syslog, and once space returns one line in the file counts them" {
	[[ $(id -u) == 0 ]] || skip "needs root (a tiny tmpfs)"
	FULL_MNT=$BATS_TEST_TMPDIR/full
	mkdir "$FULL_MNT"
	mount -t tmpfs -o size=64k,mode=700 tmpfs "$FULL_MNT" || {
		FULL_MNT=
		skip "cannot mount a tmpfs here"
	}
	local kp log=$FULL_MNT/keeper.log
	# -vv: a line per renewal (every 1/3 s)
	eval "$(timeout 20 "$RLOCK" -vv -k ci -t 1s --log-file "$log" --acquire)"
	kp=$(keeper_pid)
	echo "$kp" >>keeper.pids
	wait_until 10 grep -q 'renewed rlock:{ci}' "$log"
	dd if=/dev/zero of="$FULL_MNT/fill" bs=1k 2>/dev/null || true
	# and the room left in the log file's own last page
	yes filler >>"$log" 2>/dev/null || true
	# three renewals, whose lines find the disk full
	renewed_reset
	wait_until 10 renewed 3 'rlock:{ci}' rcli
	rm "$FULL_MNT/fill"
	wait_until 10 grep -q 'line(s) not written to this log file (No space left on device): sent to syslog' "$log"
	echo "# $(grep 'not written' "$log")" >&3
	# on a line of its own, stamped as every line is
	grep -qE '^[0-9-]+T[0-9:+-]+ rlock\[[0-9]+\]: [0-9]+ line\(s\) not written' "$log"
	# said once, not again at the next line
	wait_until 10 eval '[[ $(tail -n 1 "$log") == *"renewed rlock:{ci}"* ]]'
	assert_equal "$(grep -c 'not written' "$log")" 1
	run -0 timeout 20 "$RLOCK" -k ci --release
	wait_until 10 proc_gone "$kp"
}

@test "--acquire in a job holding thousands of locks: eval gets every one back, none cut (busy or not); past what a variable can hold, one line says so" {
	# 3971 holds: RLOCK_TOKENS is 131 056 bytes with its name and NUL, what an environment
	# variable can hold (128 KiB); the lock taken makes it pass that. Their lists (200 KB)
	# once went past the report's 60 000 bytes and were dropped: eval unset them.
	local n=3971 keys toks tok
	keys=$(printf 'rlock:{j%d} ' $(seq "$n"))
	toks=$(printf '%032x ' $(seq "$n"))
	export RLOCK_KEYS=${keys% } RLOCK_TOKENS=${toks% }
	run -0 --separate-stderr rlock -k jnew --acquire
	[[ $output =~ RLOCK_TOKEN=\'([0-9a-f]+)\' ]] && tok=${BASH_REMATCH[1]}
	track_pid "$(rcli HGET 'rlock:{jnew}:owner' pid)"
	assert_equal "$stderr" "rlock: RLOCK_TOKENS is 131089 bytes, more than one environment variable can hold (128 KiB): a command started after eval fails (Argument list too long); --release some of the job's locks"
	# counted with builtins only: after this eval no command could be started
	assert_equal "$(eval "$output"; read -ra k <<<"$RLOCK_KEYS"; read -ra t <<<"$RLOCK_TOKENS"; echo "${#k[@]} ${#t[@]} ${k[0]} ${k[-1]}")" \
		"$((n + 1)) $((n + 1)) rlock:{jnew} rlock:{j$n}"
	run -0 rlock -k jnew --release --token "$tok"
	# not acquired (busy): the job's holds, every one
	rcli SET 'rlock:{jbusy}' 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
	run -75 --separate-stderr rlock -k jbusy -n --acquire
	assert_equal "$(eval "$output"; read -ra k <<<"$RLOCK_KEYS"; echo "${#k[@]}")" "$n"
	rcli DEL 'rlock:{jbusy}' >/dev/null
}
