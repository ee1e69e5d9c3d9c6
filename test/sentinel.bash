# Sentinel topology for sentinel.bats: one master, one replica and three
# redis-sentinel processes (redis-server --sentinel) on free loopback ports, config
# files under the file's temp dir, readiness polled, every process stopped by PID
# (redis_stop_all: they are all in redis.pids). Load after helpers.
# shellcheck shell=bash disable=SC2034  # SENT_* are for the caller

SENT_MASTER=mymaster

# sent_cli PORT ARGS...: redis-cli to 127.0.0.1:PORT (a sentinel or a data server).
sent_cli() {
	local port=$1
	shift
	redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# _sentinel_ready PORT NREPLICAS NSENTINELS: the sentinel on PORT monitors the master,
# sees NREPLICAS replicas whose link is up and NSENTINELS other sentinels.
_sentinel_ready() {
	local port=$1 nrep=$2 nsent=$3
	[[ $(sent_cli "$port" SENTINEL replicas "$SENT_MASTER" 2>/dev/null |
		grep -c '^master-link-status$') -ge $nrep ]] || return 1
	[[ $(sent_cli "$port" SENTINEL sentinels "$SENT_MASTER" 2>/dev/null |
		grep -c '^runid$') -ge $nsent ]]
}

# _sentinel_id PORT: a fixed 40-hex run id for the sentinel on PORT.
_sentinel_id() { printf '%040x' "$1"; }

# sentinel_start_one PORT ALL_PORTS: a sentinel on PORT monitoring $SENT_MASTER at
# $SENT_MASTER_PORT (quorum 2, down after 1 s, failover timeout 3 s: a failed
# election is retried after 6 s). The replica and the other sentinels (ALL_PORTS,
# with their fixed run ids) are written into its config, so that it does not first
# spend 10 s discovering them. Appends its PID to SENT_PIDS, its dir to SENT_DIRS.
sentinel_start_one() {
	local port=$1 all=$2 dir p
	dir=$(mktemp -d "$BATS_FILE_TMPDIR/sentinel.XXXXXX")
	{
		cat <<EOF
port $port
bind 127.0.0.1
daemonize no
dir $dir
sentinel myid $(_sentinel_id "$port")
sentinel resolve-hostnames no
sentinel monitor $SENT_MASTER 127.0.0.1 $SENT_MASTER_PORT 2
sentinel down-after-milliseconds $SENT_MASTER 1000
sentinel failover-timeout $SENT_MASTER 3000
sentinel parallel-syncs $SENT_MASTER 1
sentinel known-replica $SENT_MASTER 127.0.0.1 $SENT_REPLICA_PORT
EOF
		for p in $all; do
			[[ $p == "$port" ]] ||
				echo "sentinel known-sentinel $SENT_MASTER 127.0.0.1 $p $(_sentinel_id "$p")"
		done
	} >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/sentinel.log" 2>&1 3>&- 4>&- &
	local pid=$!
	remember_server "$pid"
	SENT_PIDS+=("$pid")
	SENT_DIRS+=("$dir")
}

# sentinel_topology_start: start it all and wait until every sentinel sees the replica
# and the two other sentinels. Exports SENT_MASTER_PORT, SENT_REPLICA_PORT (and their
# PIDs), SENT_PORTS (space-separated), SENT_PIDS/SENT_DIRS (arrays, this shell) and
# SENT_URL (redis-sentinel://127.0.0.1:P1,...,P3/mymaster).
sentinel_topology_start() {
	local i p
	redis_start --repl-diskless-sync-delay 0 || return 1
	SENT_MASTER_PORT=$REDIS_PORT SENT_MASTER_PID=$REDIS_PID
	redis_start --replicaof 127.0.0.1 "$SENT_MASTER_PORT" --repl-diskless-sync-delay 0 || return 1
	SENT_REPLICA_PORT=$REDIS_PORT SENT_REPLICA_PID=$REDIS_PID
	wait_until 30 sh -c "redis-cli -p $SENT_REPLICA_PORT info replication |
		grep -q master_link_status:up" || return 1
	local attempt st=2
	for ((attempt = 0; attempt < 5 && st == 2; attempt++)); do
		SENT_PIDS=() SENT_DIRS=() SENT_PORTS=
		for ((i = 0; i < 3; i++)); do # three different ones: each is claimed
			p=$(free_port) || return 1
			SENT_PORTS="$SENT_PORTS${SENT_PORTS:+ }$p"
		done
		for p in $SENT_PORTS; do
			sentinel_start_one "$p" "$SENT_PORTS"
		done
		# One that died at once (its port taken since free_port): each names the
		# others' ports, so all three start again on three others.
		st=0
		local -a sp
		read -ra sp <<<"$SENT_PORTS"
		for ((i = 0; i < 3; i++)); do
			_await_server sentinel_topology_start "${SENT_PIDS[i]}" "${SENT_DIRS[i]}" \
				_redis_is "${SENT_PIDS[i]}" -p "${sp[i]}" || st=$?
			((st == 0)) || break
		done
		((st == 0)) && break
		((st == 2)) || return 1
		# the others, not waited for yet (their pids cannot be reused); the dead one
		# is reaped already
		local j
		for ((j = 0; j < 3; j++)); do
			((j == i)) && continue
			kill -KILL "${SENT_PIDS[j]}" 2>/dev/null
			wait "${SENT_PIDS[j]}" 2>/dev/null || true
			_forget_pid "${SENT_PIDS[j]}"
		done
	done
	((st == 0)) || return 1
	for p in $SENT_PORTS; do
		if ! wait_until 60 _sentinel_ready "$p" 1 2; then
			for i in "${SENT_DIRS[@]}"; do tail -20 "$i/sentinel.log" >&2; done
			return 1
		fi
	done
	SENT_URL="redis-sentinel://127.0.0.1:${SENT_PORTS// /,127.0.0.1:}/$SENT_MASTER"
	export SENT_MASTER_PORT SENT_MASTER_PID SENT_REPLICA_PORT SENT_REPLICA_PID SENT_PORTS \
		SENT_URL
}

# sentinel_master_port [SENTINEL_PORT]: the master's port as a sentinel reports it.
sentinel_master_port() {
	sent_cli "${1:-${SENT_PORTS%% *}}" SENTINEL get-master-addr-by-name "$SENT_MASTER" |
		sed -n 2p
}

# is_master PORT: the data server on PORT says ROLE master.
is_master() { [[ $(sent_cli "$1" ROLE 2>/dev/null | head -1) == master ]]; }

# sentinels_agree PORT: every sentinel reports PORT as the master.
sentinels_agree() {
	local p
	for p in $SENT_PORTS; do
		[[ $(sentinel_master_port "$p") == "$1" ]] || return 1
	done
}

# replica_linked PORT: the data server on PORT is a replica whose link is up.
replica_linked() {
	sent_cli "$1" INFO replication 2>/dev/null | grep -q master_link_status:up
}

# sentinel_failover_script FILE: write FILE, a sh script "FILE NEW MODE" that asks the
# first sentinel for a failover to the data server on port NEW and returns once MODE
# holds: "named" (every sentinel names NEW the master) or "promoted" (NEW answers
# ROLE master). A sentinel aborts a failover whose promotion it has not seen within
# failover-timeout (3 s), as on a loaded machine: an accepted request (OK) may still
# end without one. Then it asks again. A sh script, so that a wrapped command can run
# it too. Bounded: 6 requests; exit 9 when none took.
sentinel_failover_script() {
	cat >"$1" <<EOF
#!/bin/sh
new=\$1 mode=\$2 s0=${SENT_PORTS%% *}
cli() { redis-cli -h 127.0.0.1 -p "\$@"; }
named() { [ "\$(cli "\$1" SENTINEL get-master-addr-by-name $SENT_MASTER | sed -n 2p)" = "\$new" ]; }
took() {
	case \$mode in
	named) named \$s0 ;;
	*) [ "\$(cli \$new ROLE | head -1)" = master ] ;;
	esac
}
n=0
while [ \$n -lt 6 ]; do
	n=\$((n + 1))
	# INPROG while an earlier failover is being finished (a slow one may yet
	# take: asking again after it would fail back); NOGOODSLAVE while the replica
	# is not in sync
	i=0
	until took || cli \$s0 SENTINEL failover $SENT_MASTER | grep -q OK; do
		i=\$((i + 1)); [ \$i -lt 600 ] || exit 9; sleep 0.1; done
	i=0
	until took; do
		i=\$((i + 1)); [ \$i -lt 150 ] || continue 2; sleep 0.1; done
	[ \$mode = named ] || exit 0
	for s in $SENT_PORTS; do
		i=0
		until named \$s; do
			i=\$((i + 1)); [ \$i -lt 300 ] || exit 9; sleep 0.1; done
	done
	exit 0
done
exit 9
EOF
	chmod +x "$1"
}
