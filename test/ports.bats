#!/usr/bin/env bats
# The test servers' ports: a server whose port was taken between free_port and its bind
# (another suite's server, on a busy machine) starts again elsewhere: redis_start,
# cluster_start's nodes and sentinel_topology_start's trio; the server that answers on
# the port must be the one started (another's PONG is not a start); and a server reaped
# that way leaves redis.pids, so redis_stop_all never signals a pid the kernel may have
# given to another process since. Each test hands the helper a port another redis-server
# holds, then free ones. And test/claim-port, where every test program takes its ports:
# a port claimed by a live process is never handed out to another.

# shellcheck disable=SC2030,SC2031  # each test sets its own RLOCK_PORT_REGISTRY
load helpers
load cluster
load sentinel

setup_file() { :; }
teardown_file() { :; }

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	# another program's server, on the port the helper is handed first
	TAKEN=$(free_port)
	redis-server --port "$TAKEN" --bind 127.0.0.1 --save '' --appendonly no \
		</dev/null >/dev/null 2>&1 3>&- 4>&- &
	HOLDER=$!
	wait_until 10 _redis_is "$HOLDER" -p "$TAKEN"
}

teardown() {
	redis_stop_all
	redis_stop "$HOLDER"
	kill_tracked
}

# counted NAME N: NAME (a port helper) answers $TAKEN on its call number N (from 1),
# the helper's own answer otherwise; its calls are counted in NAME.calls.
counted() {
	eval "_orig_$1() $(declare -f "$1" | tail -n +2)"
	eval "$1() {
		local c=\$((\$(cat $BATS_TEST_TMPDIR/$1.calls 2>/dev/null || echo 0) + 1))
		echo \$c >$BATS_TEST_TMPDIR/$1.calls
		if ((c == $2)); then echo \$TAKEN; else _orig_$1; fi
	}"
}

@test "redis_start: a server whose port was taken starts on another, and its pid is forgotten" {
	counted free_port 1
	redis_start
	[[ $REDIS_PORT != "$TAKEN" ]]
	assert_equal "$(cat free_port.calls)" 2
	# the one that died is out of redis.pids: only the one that runs is left
	assert_equal "$(cut -d" " -f1 "$BATS_FILE_TMPDIR/redis.pids")" "$REDIS_PID"
}

@test "cluster_start: a node whose port was taken starts on another" {
	counted _cluster_port 1
	cluster_start
	[[ " $CLUSTER_PORTS " != *" $TAKEN "* ]]
	assert_equal "$(cat _cluster_port.calls)" 7 # 6 nodes, one of them twice
	assert_equal "$(wc -l <"$BATS_FILE_TMPDIR/redis.pids")" 6
}

@test "sentinel_topology_start: a sentinel whose port was taken: the three start again elsewhere" {
	# calls 1 and 2 are the master's and the replica's, 3 the first sentinel's
	counted free_port 3
	sentinel_topology_start
	[[ " $SENT_PORTS " != *" $TAKEN "* ]]
	assert_equal "$(cat free_port.calls)" 8 # 2 servers, 3 sentinels twice
	# 2 servers and the second trio: the first trio's are reaped and forgotten
	assert_equal "$(wc -l <"$BATS_FILE_TMPDIR/redis.pids")" 5
}

@test "redis_stop_all and kill_tracked never signal a PID that is another process's now" {
	# a server stopped by a test is forgotten at once
	redis_start
	local first=$REDIS_PID
	redis_stop "$first"
	[[ $(cut -d" " -f1 "$BATS_FILE_TMPDIR/redis.pids") != *"$first"* ]]
	# a PID noted with another start time stands for a process long gone: the one
	# that has it now (here a sleep of the test's own) is left alone by both
	sleep 1000 >/dev/null 2>&1 3>&- 4>&- &
	local other=$! start
	start=$(_proc_field "$other" 22)
	echo "$other $((start - 1))" >>"$BATS_FILE_TMPDIR/redis.pids"
	echo "$other $((start - 1))" >>"$BATS_TEST_TMPDIR/tracked.pids"
	redis_stop_all
	kill_tracked
	proc_alive "$other" || fail "a process that got a remembered PID was killed"
	# noted with its own start time, it is stopped
	remember_server "$other"
	redis_stop_all
	wait_until 10 proc_gone "$other"
}

# claims PID: write claims of PID (live, with its start time) on every port of
# [20000, 32767] but the ones given after it, in $RLOCK_PORT_REGISTRY.
claims() {
	local pid=$1
	shift
	perl -e 'my ($dir, $pid, $start, @keep) = @ARGV; my %k = map { $_ => 1 } @keep;
		for my $p (20000 .. 32767) { next if $k{$p};
			open(my $f, ">", "$dir/$p") or die "$dir/$p: $!"; print $f "$pid $start\n" }' \
		"$RLOCK_PORT_REGISTRY" "$pid" "$(_proc_field "$pid" 22)" "$@"
}

@test "claim-port never hands out a port a live process holds, and does once that process is gone" {
	export RLOCK_PORT_REGISTRY=$BATS_TEST_TMPDIR/ports
	mkdir -m 700 "$RLOCK_PORT_REGISTRY"
	sleep 1000 >/dev/null 2>&1 3>&- 4>&- &
	local holder=$! me
	echo "$holder $(_proc_field "$holder" 22)" >>"$BATS_TEST_TMPDIR/tracked.pids"
	sleep 1000 >/dev/null 2>&1 3>&- 4>&- &
	me=$!
	echo "$me $(_proc_field "$me" 22)" >>"$BATS_TEST_TMPDIR/tracked.pids"
	# every port held but one (nothing listens on it: the run's own claim, elsewhere)
	local free
	free=$(RLOCK_PORT_REGISTRY=$BATS_FILE_TMPDIR/run-ports "$RLOCK_SOURCE_DIR/test/claim-port" "$me")
	claims "$holder" "$free"
	run "$RLOCK_SOURCE_DIR/test/claim-port" "$me"
	assert_success
	assert_output "$free"
	assert_equal "$(cat "$RLOCK_PORT_REGISTRY/$free")" "$me $(_proc_field "$me" 22)"
	# now none: the next claimer is told so, in one line
	run "$RLOCK_SOURCE_DIR/test/claim-port" "$me"
	assert_failure 1
	assert_output "claim-port: no free loopback port in [20000, 32767]"
	# a claim noted with another start time stands for a process long gone (its PID
	# given to another since): the port is free
	echo "$me $(($(_proc_field "$me" 22) - 1))" >"$RLOCK_PORT_REGISTRY/$free"
	run "$RLOCK_SOURCE_DIR/test/claim-port" "$me"
	assert_success
	assert_output "$free"
	# the holder gone, its ports are free again
	kill "$holder"
	wait_until 10 proc_gone "$holder"
	run "$RLOCK_SOURCE_DIR/test/claim-port" "$me"
	assert_success
	[[ $output != "$free" ]]
	assert_equal "$(cat "$RLOCK_PORT_REGISTRY/$output")" "$me $(_proc_field "$me" 22)"
}

@test "claim-port: a --bus port's bus port is claimed too; a registry others can write is refused" {
	export RLOCK_PORT_REGISTRY=$BATS_TEST_TMPDIR/ports
	local p
	p=$("$RLOCK_SOURCE_DIR/test/claim-port" --bus "$$")
	((p >= 20000 && p <= 22767))
	[[ -s $RLOCK_PORT_REGISTRY/$p && -s $RLOCK_PORT_REGISTRY/$((p + 10000)) ]]
	chmod 0777 "$RLOCK_PORT_REGISTRY"
	run "$RLOCK_SOURCE_DIR/test/claim-port" "$$"
	assert_failure 1
	assert_output "claim-port: $RLOCK_PORT_REGISTRY is not a directory of this user's that only it can write: refused"
	run "$RLOCK_SOURCE_DIR/test/claim-port" 0
	assert_failure 1
	assert_output "claim-port: usage: claim-port [--bus] OWNER_PID"
}
