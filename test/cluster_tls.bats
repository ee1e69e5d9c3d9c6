#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for eval; bats sets $output, $stderr
# Redis Cluster over TLS (SPEC §2, §8): the address rlock connects to after a MOVED, an
# ASK or CLUSTER SLOTS is the one the cluster gave, not the one the user typed, and the
# certificate is verified for that address or host name (as rlock verifies the URL's,
# as redis-cli verifies the name it dials), or for --sni NAME on every node. Two TLS
# masters (TLS bus: tls-cluster), certificates made here (tls_make_certs: SAN
# IP:127.0.0.1, DNS:localhost): A on 127.0.0.1 serves slots 0-8191; B listens on
# 127.0.0.1 and 127.0.0.2 and announces 127.0.0.2, which its certificate does not name,
# and serves 8192-16383 (name 'a' hashes to 15495 there, 'b' to 3300 on A).

load helpers
load cluster

# tnode_start: a TLS cluster node on a free port (and bus port) with ARGS; exports
# TNODE_PORT. Its PID is stopped by redis_stop_all.
tnode_start() {
	local port dir c=$TLS_CERTS attempt st=2 pid
	for ((attempt = 0; attempt < 5 && st == 2; attempt++)); do
		port=$(_cluster_port) || return 1
		dir=$BATS_FILE_TMPDIR/node.$port
		mkdir -p "$dir"
		# the bus always asks for a client certificate: the nodes present client.pem
		redis-server --port 0 --tls-port "$port" --tls-cluster yes --cluster-enabled yes \
			--tls-cert-file "$c/server.pem" --tls-key-file "$c/server.key" \
			--tls-client-cert-file "$c/client.pem" --tls-client-key-file "$c/client.key" \
			--tls-ca-cert-file "$c/ca.pem" --tls-auth-clients no \
			--cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 3000 \
			--save '' --appendonly no --daemonize no --dir "$dir" "$@" \
			</dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
		pid=$!
		remember_server "$pid"
		st=0
		_await_server tnode_start "$pid" "$dir" _tls_ready "$port" || st=$?
	done
	((st == 0)) || return 1
	export TNODE_PORT=$port
}

# both_ok: each node serves its slots and knows the other.
both_ok() {
	local p
	for p in "$PA" "$PB"; do
		tls_cli "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
		tls_cli "$p" CLUSTER INFO | grep -q '^cluster_known_nodes:2' || return 1
	done
}

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	redis_start # common_setup's server; the cluster is all TLS
	tnode_start --bind 127.0.0.1
	export PA=$TNODE_PORT
	tnode_start --bind 127.0.0.1 127.0.0.2 --cluster-announce-ip 127.0.0.2
	export PB=$TNODE_PORT
	# ADDSLOTS, not ADDSLOTSRANGE (7.0)
	# shellcheck disable=SC2046  # one argument per slot
	tls_cli "$PA" CLUSTER ADDSLOTS $(seq 0 8191) >/dev/null
	# shellcheck disable=SC2046
	tls_cli "$PB" CLUSTER ADDSLOTS $(seq 8192 16383) >/dev/null
	tls_cli "$PA" CLUSTER MEET 127.0.0.2 "$PB" >/dev/null
	wait_until 30 both_ok
	export CA=$TLS_CERTS/ca.pem
	[[ $(tls_cli "$PA" CLUSTER KEYSLOT a) == 15495 && $(tls_cli "$PA" CLUSTER KEYSLOT b) == 3300 ]]
}

teardown_file() { redis_stop_all; }

setup() {
	common_setup
	tls_cli "$PA" FLUSHALL >/dev/null
	tls_cli "$PB" FLUSHALL >/dev/null
}

# endpoints TYPE [HOST]: both nodes name themselves by TYPE (ip or hostname), B as HOST.
endpoints() {
	local p
	for p in "$PA" "$PB"; do
		tls_cli "$p" CONFIG SET cluster-preferred-endpoint-type "$1" >/dev/null
	done
	tls_cli "$PA" CONFIG SET cluster-announce-hostname "${2:+localhost}" >/dev/null
	tls_cli "$PB" CONFIG SET cluster-announce-hostname "${2:-}" >/dev/null
}

# moved_to ADDR: node A redirects name 'a' to ADDR (the gossip has carried B's name).
moved_to() {
	[[ $(tls_cli "$PA" GET a 2>&1) == "MOVED 15495 $1" ]]
}

@test "a MOVED to an address the certificate does not name: 69, one line naming it, never run; --sni is verified on every node" {
	# the URL's node verifies (127.0.0.1); the slot's master is at 127.0.0.2
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$PA" --cacert "$CA" -k b -- echo ran
	assert_output ran
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$PA" --cacert "$CA" -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "127\.0\.0\.2:$PB: certificate verify failed \(IP address mismatch: certificate not valid for 127\.0\.0\.2\); the cluster announces that address: give --sni "
	[[ ! -e ran ]]
	[[ $(tls_cli "$PB" EXISTS 'rlock:{a}:fence') == 0 ]]
	# --status, and a run given its node's own name: the same refusal
	run -69 --separate-stderr rlock -u "rediss://localhost:$PA" --cacert "$CA" -k a --status
	assert_one_line_error
	assert_regex "$stderr" 'not valid for 127\.0\.0\.2'
	# --sni: the one name verified, on the node of the URL and on the one it redirects to
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$PA" --cacert "$CA" --sni localhost \
		-k a -- echo ran
	assert_output ran
	[[ $(tls_cli "$PB" GET 'rlock:{a}:fence') == 1 ]]
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$PA" --cacert "$CA" \
		--sni other.example -k b -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'not valid for other\.example\)$'
	[[ ! -e ran ]]
}

@test "nodes named by host name (cluster-preferred-endpoint-type hostname): that name is verified" {
	[[ $(tls_cli "$PA" CONFIG GET cluster-preferred-endpoint-type) == *ip* ]] ||
		skip "this server has no cluster-preferred-endpoint-type (Redis 7.0)"
	endpoints hostname localhost
	wait_until 30 moved_to "localhost:$PB"
	wait_until 30 eval 'tls_cli "$PA" CLUSTER SLOTS | grep -A1 -x localhost | grep -qx "$PB"'
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$PA" --cacert "$CA" -k a -- echo ran
	endpoints ip
	assert_output ran
	[[ $(tls_cli "$PB" GET 'rlock:{a}:fence') == 1 ]]
}
