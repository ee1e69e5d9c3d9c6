#!/usr/bin/env bats
# --wait-replicas N: after acquiring, WAIT until N replicas have the lock; otherwise
# release it and exit 69 without running the command. Real master + real replica.

# shellcheck disable=SC2154  # bats sets $stderr (run --separate-stderr)
load helpers

setup_file() {
	common_setup_file
	export MASTER_PORT=$REDIS_PORT MASTER_URL=$REDIS_URL MASTER_PID=$REDIS_PID
}

@test "no replica: not acknowledged, lock released, command not run" {
	run -69 --separate-stderr rlock -u "$MASTER_URL" --wait-replicas 1 --io-timeout 300ms \
		-k r -- touch ran
	[[ ! -e ran ]]
	assert_regex "$stderr" 'only 0 of 1 replicas acknowledged'
	key_absent 'rlock:{r}'
}

@test "with a live replica: acquired, the replica has the token" {
	redis_start --replicaof 127.0.0.1 "$MASTER_PORT"
	wait_until 20 sh -c "redis-cli -p $REDIS_PORT info replication | grep -q master_link_status:up"
	run -0 rlock -u "$MASTER_URL" --wait-replicas 1 -k r -- \
		sh -c "redis-cli -p $REDIS_PORT get \"\$RLOCK_KEY\" > replica-saw; test \"\$(cat replica-saw)\" = \"\$RLOCK_TOKEN\""
	redis_stop "$REDIS_PID"
}

@test "bad count is a usage error" {
	run -64 rlock -u "$MASTER_URL" --wait-replicas -1 -k r -- true
	run -64 rlock -u "$MASTER_URL" --wait-replicas many -k r -- true
}
