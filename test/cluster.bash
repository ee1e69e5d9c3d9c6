# A real Redis Cluster for the tests: 3 masters + 3 replicas (`--cluster-enabled yes`)
# on free loopback ports (each port and port+10000, the cluster bus, free; both below the
# kernel's ephemeral range, so <= 22767; a node whose port was taken meanwhile moves on),
# nodes.conf under the file's temp dir, created with `redis-cli --cluster create`,
# readiness polled (cluster_state:ok on every node), stopped by PID (redis_stop_all:
# every PID is in redis.pids like redis_start's). Load after helpers.
# shellcheck shell=bash disable=SC2034  # CLUSTER_* are for the caller

# _cluster_port: a free loopback port whose bus port (+10000) is free too, both claimed
# for this bats run (free_port's test/claim-port).
_cluster_port() {
	"$RLOCK_SOURCE_DIR/test/claim-port" --bus "${BATS_ROOT_PID:-$$}"
}

# _cluster_ok PORT...: every node says cluster_state:ok and sees every other one.
_cluster_ok() {
	local p
	for p in "$@"; do
		redis-cli -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
		[[ $(redis-cli -p "$p" CLUSTER INFO | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p') == "$#" ]] || return 1
	done
}

# _cluster_replicas_linked PORT...: every replica among them has its link to its master
# up (cluster_state:ok comes before: a CLUSTER FAILOVER or a WAIT for a replica needs it).
_cluster_replicas_linked() {
	local p info
	for p in "$@"; do
		info=$(redis-cli -p "$p" INFO replication 2>/dev/null) || return 1
		[[ $info != *role:slave* || $info == *master_link_status:up* ]] || return 1
	done
}

# cluster_start [N_MASTERS]: start 2*N nodes (default 3 masters + 3 replicas) and make
# them a cluster. Exports CLUSTER_PORTS ("p1 p2 ..."), CLUSTER_PIDS, CLUSTER_DIR,
# REDIS_URL / REDIS_PORT (the first node; any node's URL works).
cluster_start() {
	local masters=${1:-3} i port pid dir ports=() pids=() addrs=()
	CLUSTER_DIR=$(mktemp -d "${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}}/cluster.XXXXXX")
	for ((i = 0; i < 2 * masters; i++)); do
		local attempt st=2
		for ((attempt = 0; attempt < 5 && st == 2; attempt++)); do
			port=$(_cluster_port) || return 1
			dir=$CLUSTER_DIR/$port
			mkdir -p "$dir"
			redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
				--cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 3000 \
				--save '' --appendonly no --daemonize no --dir "$dir" \
				</dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
			pid=$!
			remember_server "$pid"
			st=0
			# 2: it died (its port or bus port taken meanwhile): another port
			_await_server cluster_start "$pid" "$dir" _redis_is "$pid" -p "$port" || st=$?
		done
		if ((st != 0)); then
			cat "$dir/redis.log" >&2
			return 1
		fi
		ports+=("$port")
		pids+=("$pid")
		addrs+=("127.0.0.1:$port")
	done
	if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		>"$CLUSTER_DIR/create.log" 2>&1; then
		cat "$CLUSTER_DIR/create.log" >&2
		return 1
	fi
	if ! wait_until 30 _cluster_ok "${ports[@]}" || ! wait_until 30 _cluster_replicas_linked "${ports[@]}"; then
		echo "cluster_start: the cluster never became ok (or a replica never linked)" >&2
		for port in "${ports[@]}"; do redis-cli -p "$port" CLUSTER NODES >&2; done
		return 1
	fi
	export CLUSTER_PORTS="${ports[*]}" CLUSTER_PIDS="${pids[*]}" CLUSTER_DIR
	export REDIS_PORT=${ports[0]} REDIS_PID=${pids[0]} REDIS_SOCKET=
	export REDIS_URL="redis://127.0.0.1:${ports[0]}"
}

# ccli ARGS...: redis-cli that follows redirects (-c), on the first node.
ccli() { redis-cli -c -p "$REDIS_PORT" "$@"; }

# cluster_masters: the ports of the masters, one a line.
cluster_masters() {
	# a master flagged "fail?" (PFAIL: suspected by this node alone, as a loaded host's
	# late cluster-bus ping makes it) still serves its slots: only "fail" leaves it out
	redis-cli -p "$REDIS_PORT" CLUSTER NODES | awk '$3 ~ /master/ && ("," $3 ",") !~ /,fail,/ {
		split($2, a, "[:@]"); print a[2] }'
}

# cluster_name_on PORT PREFIX: a lock name PREFIX<i> whose keys live on the master at
# PORT (the first of 300).
cluster_name_on() {
	local i
	for ((i = 0; i < 300; i++)); do
		# asked of PORT itself (a number, not a MOVED): not through cluster_masters,
		# which leaves out a master another node flags "fail?" (PFAIL) on a loaded host
		if [[ $(redis-cli -p "$1" EXISTS "rlock:{$2$i}" 2>&1) =~ ^[0-9]+$ ]]; then
			echo "$2$i"
			return 0
		fi
	done
	return 1
}

# cluster_owner KEY: the port of the master that serves KEY's slot (the one that
# answers without a redirect).
cluster_owner() {
	local p
	for p in $(cluster_masters); do
		if [[ $(redis-cli -p "$p" EXISTS "$1" 2>&1) =~ ^[0-9]+$ ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# cluster_replica_of PORT: the port of a replica of the master at PORT.
cluster_replica_of() {
	redis-cli -p "$1" CLUSTER NODES | awk -v p="$1" '
		{ split($2, a, "[:@]"); port[$1] = a[2]; master[$1] = $4 }
		END { for (id in port) if (port[id] == p) m = id
		      for (id in port) if (master[id] == m) { print port[id]; exit } }'
}

# cluster_is_master PORT: the node at PORT is a master now.
cluster_is_master() {
	[[ $(redis-cli -p "$1" ROLE 2>/dev/null | head -1) == master ]]
}

# cluster_failover REPLICA: a manual CLUSTER FAILOVER on the replica at port REPLICA,
# returned once it is a master. A replica gives a manual failover up after 5 s (on a
# loaded machine its master may not pause, or its election not end, in time): then it
# asks again, at most 6 times, 10 s for each. Fails when none took.
cluster_failover() {
	local n
	for ((n = 0; n < 6; n++)); do
		redis-cli -p "$1" CLUSTER FAILOVER >/dev/null
		wait_until 10 cluster_is_master "$1" 2>/dev/null && return 0
	done
	echo "CLUSTER FAILOVER on $1 never took (6 requests)" >&2
	return 1
}
