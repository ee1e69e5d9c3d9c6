#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $output, $stderr
# Redis Cluster, the URL's own node (the seed) serves the lock's slot and crashes
# (SIGKILL) while the lock is held and waited for: its replica is promoted after
# cluster-node-timeout. rlock met no redirect on the way (the seed answered every
# request itself), yet it is in a Cluster: the holder's renewal and release and the
# waiter must follow the failover to the promoted replica, as they do for any other
# master (cluster.bats), not keep dialling the dead URL. One 3-master cluster for the
# file (test/cluster.bash); the test kills its seed, so it is alone in its file.

load helpers
load cluster

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	cluster_start
}

teardown_file() { redis_stop_all; }

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
}

# name_on PORT: a lock name whose keys live on the master at PORT.
name_on() { cluster_name_on "$1" s; }

# moved_to PORT KEY SKIP: every master but SKIP (the dead one) sends KEY to PORT.
moved_to() {
	local p
	for p in $CLUSTER_PORTS; do
		[[ $p == "$1" || $p == "$3" ]] || ! cluster_is_master "$p" ||
			[[ $(redis-cli -p "$p" EXISTS "$2" 2>&1) == *":$1" ]] || return 1
	done
}

@test "the URL's own node crashes while it holds the lock (SIGKILL): the release and the waiter follow the promoted replica" {
	local seed replica name a_pid a_err b_pid b_err
	seed=$REDIS_PORT
	name=$(name_on "$seed")
	replica=$(cluster_replica_of "$seed")
	[[ -n $name && -n $replica ]] || fail "no name on the seed $seed, or no replica: $name $replica"
	# --wait-replicas 1: the replica has the lock before the command starts; a lease far
	# longer than the failover (node timeout 3 s), so it survives it. The holder learns
	# the slot map after its first renewal (ttl/3: off the command's path)
	rlock_bg -vv --wait-replicas 1 -k "$name" -t 30s -- "$HOLD" a
	a_pid=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 test -e a.started
	wait_until 60 grep -q '^rlock: renewed' "$a_err"
	rlock_bg -vv -w 120s -k "$name" -- sh -c 'kill -0 "$(cat a.pid)" 2>/dev/null && touch b.overlap
		touch b.started'
	b_pid=$RLOCK_PID b_err=$RLOCK_ERR
	wait_until 30 grep -q 'busy.*waiting' "$b_err"
	[[ $(printf 'READONLY\nEXISTS %s\n' "rlock:{$name}" | redis-cli -p "$replica" | tail -1) == 1 ]] ||
		fail "the replica has no lock"
	kill -KILL "$(redis-cli -p "$seed" INFO server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')"
	wait_until 60 cluster_is_master "$replica"
	# every master knows it (a release that asks one that does not yet fails at once)
	wait_until 30 moved_to "$replica" "rlock:{$name}" "$seed"
	touch a.release
	rlock_wait "$a_pid" 60
	cat "$a_err"
	# released on the promoted replica (it has no replica of its own: not confirmed, a
	# warning), not "cannot release ... expires by its TTL"
	assert_equal "$RLOCK_STATUS" 0
	run ! grep -q 'cannot release' "$a_err"
	rlock_wait "$b_pid" 60 || { cat "$b_err"; false; }
	cat "$b_err"
	assert_equal "$RLOCK_STATUS" 0
	[[ -e b.started && ! -e b.overlap ]]
	[[ $(redis-cli -p "$replica" EXISTS "rlock:{$name}") == 0 ]]
}
