#!/usr/bin/env bats
# --wait-aof LOCAL[,REPLICAS] (issue 39): after acquiring and before the command starts,
# WAITAOF until the grant (and its fence) is fsynced in the AOF of the master (LOCAL 1)
# and of REPLICAS replicas, within --io-timeout; else the lock is given back and rlock
# exits 69 with one line. A server without WAITAOF (Redis < 7.2) or without appendonly
# is refused the same way, never a silent run. The file runs against whatever server
# the pass starts (RLOCK_TEST_SERVER_BIN: Redis 7.2, Valkey; else the host's Redis
# 7.0): where the server has no WAITAOF, each test asserts the refusal instead.

# shellcheck disable=SC2154,SC2016  # bats sets $output, $stderr; -c takes the command unexpanded
load helpers

setup_file() {
	common_setup_file --appendonly yes --appendfsync everysec
	export AOF_URL=$REDIS_URL AOF_PORT=$REDIS_PORT
	# WAITAOF is a command of Redis 7.2 and Valkey: what this server has decides what
	# each test expects (COMMAND INFO of an unknown command is a nil)
	if [[ $(rcli COMMAND INFO WAITAOF | head -1) == waitaof ]]; then
		export HAS_WAITAOF=1
	else
		export HAS_WAITAOF=0
	fi
}

# A replica a test started (REPLICA_PID): stopped even when the test fails, so that
# the next test's master has none but its own.
teardown() {
	[[ -z ${REPLICA_PID:-} ]] || redis_stop "$REPLICA_PID"
	common_teardown
}

# refused_no_waitaof: the one line and 69 of a server without WAITAOF.
refused_no_waitaof() {
	assert_equal "$status" 69
	assert_equal "$stderr" "rlock: --wait-aof $1: the server refused WAITAOF (ERR unknown command 'WAITAOF', with args beginning with: '${1%,*}' '${1#*,}' '${2:-2000}'): it needs Redis 7.2 or later, or Valkey: not running the command"
}

# given_back NAME: the lock's key is gone (released, not left to expire), its fence kept.
given_back() {
	assert_equal "$(rcli EXISTS "rlock:{$1}")" 0
	assert_equal "$(rcli EXISTS "rlock:{$1}:fence")" 1
}

@test "--wait-aof 1: the command runs once the grant is in the master's AOF (everysec)" {
	run --separate-stderr rlock -u "$AOF_URL" --wait-aof 1 -k a -c 'echo "ran $RLOCK_FENCE"'
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 0
		assert_equal "$output" "ran 1"
		[[ -z $stderr ]] || fail "stderr: $stderr"
		# the grant, its fence and the release are in the AOF on disk
		grep -aq 'rlock:{a}:fence' "$REDIS_DIR"/appendonlydir/*.incr.aof
	else
		refused_no_waitaof 1,0
		[[ -z $output ]] || fail "the command ran: $output"
		given_back a
	fi
	# the config file says it too
	printf 'wait-aof = 1\n' >"$BATS_TEST_TMPDIR/c.conf"
	RLOCK_CONFIG=$BATS_TEST_TMPDIR/c.conf run --separate-stderr rlock -u "$AOF_URL" -k a -c 'echo ran'
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 0
		assert_equal "$output" ran
	else
		refused_no_waitaof 1,0
		[[ -z $output ]] || fail "the command ran: $output"
	fi
}

@test "--wait-aof 1 with appendonly no: refused with one line, 69, the lock given back" {
	redis_start
	run --separate-stderr rlock -u "$REDIS_URL" --wait-aof 1 -k b -- touch "$BATS_TEST_TMPDIR/ran"
	[[ ! -e $BATS_TEST_TMPDIR/ran ]] || fail "the command ran"
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 69
		assert_equal "$stderr" "rlock: --wait-aof 1,0: the server refused WAITAOF (ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled): the master needs appendonly yes: not running the command"
	else
		refused_no_waitaof 1,0
	fi
	given_back b
	# the next run gets the lock at once (released, not left to expire)
	run -0 rlock -u "$REDIS_URL" -n -k b -- true
	redis_stop "$REDIS_PID"
}

@test "--wait-aof 1,1 without a replica: 69 after --io-timeout, the lock given back" {
	run --separate-stderr rlock -u "$AOF_URL" --wait-aof 1,1 --io-timeout 300ms -k c \
		-- touch "$BATS_TEST_TMPDIR/ran"
	[[ ! -e $BATS_TEST_TMPDIR/ran ]] || fail "the command ran"
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 69
		assert_regex "$stderr" "^rlock: --wait-aof 1,1: within 300 ms the writes reached the master's AOF: (yes|no), the AOF of 0 of 1 replica\(s\): not running the command$"
	else
		refused_no_waitaof 1,1 300
	fi
	given_back c
	run -0 rlock -u "$AOF_URL" -n -k c -- true
}

@test "--wait-aof 1,1 with a replica that has appendonly yes: runs; 0,1 too" {
	local rport rpid
	redis_start --replicaof 127.0.0.1 "$AOF_PORT" --appendonly yes --appendfsync everysec
	rport=$REDIS_PORT rpid=$REDIS_PID
	wait_until 30 sh -c "redis-cli -p $rport INFO replication | grep -q master_link_status:up"
	wait_until 30 sh -c "redis-cli -p $AOF_PORT INFO replication | grep -q connected_slaves:1"
	for w in 1,1 0,1; do
		run --separate-stderr rlock -u "$AOF_URL" --wait-aof "$w" --io-timeout 5s -k d \
			-c 'echo "ran $RLOCK_FENCE"'
		if ((HAS_WAITAOF)); then
			assert_equal "$status" 0
			assert_regex "$output" '^ran [0-9]+$'
		else
			refused_no_waitaof "$w" 5000
		fi
	done
	redis_stop "$rpid"
}

@test "--wait-aof: bad values and Redlock are usage errors (64)" {
	for v in 2 1,x '1,' ,1 1,1001 -1 '1 ,1' 01; do
		run -64 --separate-stderr rlock -u "$AOF_URL" --wait-aof "$v" -k e -- true
		assert_equal "$stderr" "rlock: --wait-aof: '$v' is not LOCAL[,REPLICAS] (LOCAL 0 or 1, REPLICAS 0..1000) (try 'rlock --help')"
	done
	run -64 --separate-stderr rlock -u "$AOF_URL" -u "redis://127.0.0.1:$(dead_port)" \
		-u "redis://127.0.0.1:$(dead_port)" --wait-aof 1 -k e -- true
	assert_equal "$stderr" "rlock: --wait-aof does not apply to Redlock (several --url) (try 'rlock --help')"
	# 0 (and 0,0) asks for nothing
	run -0 rlock -u "$AOF_URL" --wait-aof 0 -k e -- true
	run -0 rlock -u "$AOF_URL" --wait-aof 0,0 -k e -- true
}

@test "--wait-aof 0,1 --once-per: the release and its mark are WAITAOFed too; a replica that stopped: said not confirmed, never marked done" {
	# --wait-aof makes the grant survive a restart from the AOF; the --once-per mark is
	# what the release writes, and a restart that lost it runs the job again inside its
	# window: the release is waited for as the grant was, and said not confirmed when
	# it is not (as --wait-replicas does, issue 41). The replica stops while the command
	# runs: nothing the release writes can reach its AOF.
	local rport rpid
	redis_start --replicaof 127.0.0.1 "$AOF_PORT" --appendonly yes --appendfsync everysec
	rport=$REDIS_PORT rpid=$REDIS_PID REPLICA_PID=$REDIS_PID
	wait_until 30 sh -c "redis-cli -p $rport INFO replication | grep -q master_link_status:up"
	wait_until 30 sh -c "redis-cli -p $AOF_PORT INFO replication | grep -q connected_slaves:1"
	run --separate-stderr rlock -v -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s --once-per 1h \
		-k op -- kill -STOP "$rpid"
	kill -CONT "$rpid"
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 0
		assert_regex "$stderr" "released rlock:\{op\} on the master, not confirmed in the AOF \(--wait-aof 0,1: within 5000 ms the writes reached the AOF of 0 of 1 replica\(s\)\); a crash or a failover now can bring the lock back until its TTL, and lose the mark: not confirmed done \(--once-per\), a later run may run again"
		[[ $stderr != *"marked rlock:{op} done"* ]] || fail "said marked done: $stderr"
		# a release without a mark (nor a --min-hold keep) is not waited for: the lock
		# lost in a crash only stays until its TTL
		run -0 --separate-stderr rlock -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s -k op3 \
			-- kill -STOP "$rpid"
		kill -CONT "$rpid"
		[[ -z $stderr ]] || fail "stderr: $stderr"
		# a --min-hold keep is
		run -0 --separate-stderr rlock -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s \
			--min-hold 1h -k op4 -- kill -STOP "$rpid"
		kill -CONT "$rpid"
		assert_equal "$stderr" "rlock: released rlock:{op4} (--min-hold) on the master, not confirmed in the AOF (--wait-aof 0,1: within 5000 ms the writes reached the AOF of 0 of 1 replica(s)); a crash or a failover now can bring the lock back until its TTL"
		# a release that the replica's AOF confirms says nothing more than before
		wait_until 30 sh -c "redis-cli -p $AOF_PORT INFO replication | grep -q 'slave0:.*state=online'"
		run -0 --separate-stderr rlock -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s --once-per 1h \
			-k op2 -- true
		[[ -z $stderr ]] || fail "stderr: $stderr"
		assert_equal "$(redis-cli -p "$rport" EXISTS 'rlock:{op2}:done')" 1
	else
		assert_equal "$status" 69 # the last line: -v's come before it
		assert_equal "${stderr##*$'\n'}" "rlock: --wait-aof 0,1: the server refused WAITAOF (ERR unknown command 'WAITAOF', with args beginning with: '0' '1' '5000'): it needs Redis 7.2 or later, or Valkey: not running the command"
	fi
	redis_stop "$rpid"
}

@test "--acquire --wait-aof 0,1, then --release --wait-aof 0,1 --once-per with the replica stopped: the release said not confirmed, never done" {
	local rport rpid
	redis_start --replicaof 127.0.0.1 "$AOF_PORT" --appendonly yes --appendfsync everysec
	rport=$REDIS_PORT rpid=$REDIS_PID REPLICA_PID=$REDIS_PID
	wait_until 30 sh -c "redis-cli -p $rport INFO replication | grep -q master_link_status:up"
	wait_until 30 sh -c "redis-cli -p $AOF_PORT INFO replication | grep -q connected_slaves:1"
	run --separate-stderr rlock -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s -k kp --acquire
	if ((HAS_WAITAOF)); then
		assert_equal "$status" 0
		eval "$output"
		kill -STOP "$rpid"
		run --separate-stderr rlock -u "$AOF_URL" --wait-aof 0,1 --io-timeout 5s --once-per 1h \
			-k kp --release
		kill -CONT "$rpid"
		unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
		assert_equal "$status" 0
		assert_equal "$stderr" "rlock: released rlock:{kp} on the master, not confirmed in the AOF (--wait-aof 0,1: within 5000 ms the writes reached the AOF of 0 of 1 replica(s)); a crash or a failover now can bring the lock back until its TTL, and lose the mark: not confirmed done (--once-per), a later run may run again"
		assert_equal "$(rcli EXISTS 'rlock:{kp}')" 0
	else
		assert_equal "$status" 69
		assert_regex "$stderr" "the server refused WAITAOF"
		assert_equal "$(rcli EXISTS 'rlock:{kp}')" 0
	fi
	redis_stop "$rpid"
}
