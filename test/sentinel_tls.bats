#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $output, $stderr
# Sentinel over TLS (SPEC §2, §8): rediss-sentinel:// (or --tls with redis-sentinel://)
# speaks TLS to the sentinels and to the master they name, verifying the chain and the
# host name (or IP) of each. One topology for the file, TLS only (port 0), certificates
# made here (tls_make_certs: SAN IP:127.0.0.1, DNS:localhost): a master and a replica
# with tls-replication, two sentinels with tls-replication (their links to the data
# nodes and to each other are TLS too). The master also listens on 127.0.0.2, and the
# sentinels know it under a second name, 'misnamed', at that address: its certificate
# does not name 127.0.0.2.

load helpers

MASTER=mymaster

setup_file() {
	local i p all=
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	tls_redis_start --bind 127.0.0.1 127.0.0.2 --tls-replication yes \
		--repl-diskless-sync-delay 0
	export M_PORT=$TLS_PORT
	tls_redis_start --tls-replication yes --replicaof 127.0.0.1 "$M_PORT" \
		--repl-diskless-sync-delay 0
	export R_PORT=$TLS_PORT
	wait_until 30 replica_linked
	for ((i = 0; i < 2; i++)); do
		p=$(free_port)
		all="$all${all:+ }$p"
	done
	for p in $all; do sentinel_tls_start "$p" "$all"; done
	for p in $all; do wait_until 60 sentinel_sees_all "$p"; done
	export S_PORTS=$all
	export S_URL="rediss-sentinel://127.0.0.1:${all// /,127.0.0.1:}/$MASTER"
	export CA=$TLS_CERTS/ca.pem OTHER_CA=$TLS_CERTS/other-ca.pem
}

teardown_file() { redis_stop_all; }

setup() {
	tls_cli "$M_PORT" FLUSHALL >/dev/null
	cd "$BATS_TEST_TMPDIR" || return 1
}

teardown() { kill_tracked; }

# replica_linked: the replica's TLS link to the master is up.
replica_linked() {
	tls_cli "$R_PORT" INFO replication 2>/dev/null | grep -q master_link_status:up
}

# sentinel_tls_start PORT ALL_PORTS: a TLS-only sentinel on PORT (127.0.0.1 and
# 127.0.0.2) monitoring the master as $MASTER at 127.0.0.1 and as 'misnamed' at
# 127.0.0.2; the replica and the other sentinels written into its config (no 10 s of
# discovery). Its PID is stopped by redis_stop_all.
sentinel_tls_start() {
	local port=$1 all=$2 dir p c=$TLS_CERTS
	dir=$(mktemp -d "$BATS_FILE_TMPDIR/sentinel.XXXXXX")
	{
		cat <<EOF
port 0
tls-port $port
bind 127.0.0.1 127.0.0.2
tls-cert-file $c/server.pem
tls-key-file $c/server.key
tls-ca-cert-file $c/ca.pem
tls-auth-clients no
tls-replication yes
daemonize no
dir $dir
sentinel myid $(printf '%040x' "$port")
sentinel resolve-hostnames no
sentinel monitor $MASTER 127.0.0.1 $M_PORT 2
sentinel down-after-milliseconds $MASTER 60000
sentinel known-replica $MASTER 127.0.0.1 $R_PORT
sentinel monitor misnamed 127.0.0.2 $M_PORT 2
sentinel down-after-milliseconds misnamed 60000
EOF
		for p in $all; do
			[[ $p == "$port" ]] ||
				echo "sentinel known-sentinel $MASTER 127.0.0.1 $p $(printf '%040x' "$p")"
		done
	} >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/sentinel.log" 2>&1 3>&- 4>&- &
	remember_server "$!"
}

# sentinel_sees_all PORT: the sentinel on PORT answers over TLS and its own TLS links
# work: the master is up (not s_down), with one replica and one other sentinel.
sentinel_sees_all() {
	local info
	info=$(tls_cli "$1" SENTINEL master "$MASTER" 2>/dev/null) || return 1
	[[ $(sed -n '/^flags$/{n;p}' <<<"$info") == master ]] &&
		[[ $(sed -n '/^num-slaves$/{n;p}' <<<"$info") == 1 ]] &&
		[[ $(sed -n '/^num-other-sentinels$/{n;p}' <<<"$info") == 1 ]]
}

@test "rediss-sentinel:// and --tls with redis-sentinel://: the lock on the TLS master the sentinels name" {
	run -0 --separate-stderr rlock -v -u "$S_URL" --cacert "$CA" --wait-replicas 1 \
		-k s -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 1
	assert_regex "$stderr" "master 'mymaster' is 127\.0\.0\.1:$M_PORT"
	# --tls makes a redis-sentinel:// URL TLS; a sentinel reached by its DNS name
	run -0 rlock --tls -u "redis-sentinel://localhost:${S_PORTS%% *}/$MASTER" --cacert "$CA" \
		-k s -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 2
	[[ $(tls_cli "$M_PORT" GET 'rlock:{s}:fence') == 2 ]]
	[[ $(tls_cli "$M_PORT" EXISTS 'rlock:{s}') == 0 ]] # released
	[[ $(tls_cli "$R_PORT" GET 'rlock:{s}:fence') == 2 ]] # replicated over TLS
	# held: --status names the master; a waiter is woken by the release (its wake
	# list, on the master the sentinels name, over TLS too)
	make_hold_script
	rlock_bg -u "$S_URL" --cacert "$CA" -k s -- "$HOLD" a
	local holder=$RLOCK_PID
	wait_until 30 test -e a.started
	run -75 rlock -u "$S_URL" --cacert "$CA" -k s --status
	assert_regex "$output" "master +127\.0\.0\.1:$M_PORT \(Sentinel 'mymaster'\)"
	rlock_bg -vv -u "$S_URL" --cacert "$CA" -k s -- touch waiter-ran
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	wait_until 30 eval '[[ $(waiters s tls_cli "$M_PORT") == 1 ]]'
	touch a.release
	rlock_wait "$holder" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e waiter-ran ]]
	grep -q 'woken by the release' "$waiter_err" || fail "waiter: $(cat "$waiter_err")"
}

# Short deadlines: a sentinel or master that does not answer costs little. (What
# waiting cannot fix, a refused certificate, fails at once: the last test.)
FAIL_FAST=(--connect-timeout 1s --io-timeout 500ms)

@test "sentinels over TLS with the wrong CA: 69, one line, not run" {
	run -69 --separate-stderr rlock -u "$S_URL" --cacert "$OTHER_CA" "${FAIL_FAST[@]}" \
		-k w -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Cc]ertificate|verif|issuer'
	[[ ! -e ran ]]
	[[ $(tls_cli "$M_PORT" EXISTS 'rlock:{w}:fence') == 0 ]]
}

@test "host names verified: a sentinel at 127.0.0.2, a master named at 127.0.0.2: 69 mismatch" {
	# the sentinel's certificate names 127.0.0.1 and localhost, not 127.0.0.2
	run -69 --separate-stderr rlock -u "rediss-sentinel://127.0.0.2:${S_PORTS%% *}/$MASTER" \
		--cacert "$CA" "${FAIL_FAST[@]}" -k h -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Mm]ismatch'
	assert_regex "$stderr" '127\.0\.0\.2'
	[[ $stderr != *announce* ]] || fail "the address the user typed is no announced one"
	# the sentinels (verified) name the master at 127.0.0.2: the master is refused
	run -69 --separate-stderr rlock -u "rediss-sentinel://127.0.0.1:${S_PORTS%% *}/misnamed" \
		--cacert "$CA" "${FAIL_FAST[@]}" -k h -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Mm]ismatch'
	assert_regex "$stderr" "127\.0\.0\.2:$M_PORT"
	# an address the user never typed: where it came from, and the way out
	assert_regex "$stderr" 'not valid for 127\.0\.0\.2\); the sentinels announce that address: give --sni '
	[[ ! -e ran ]]
	[[ $(tls_cli "$M_PORT" EXISTS 'rlock:{h}:fence') == 0 ]]
}

@test "--sni over Sentinel: the name sent to, and verified on, the sentinels and the master alike" {
	# the master named at 127.0.0.2 (not in its certificate) is verified as localhost
	run -0 --separate-stderr rlock -u "rediss-sentinel://127.0.0.1:${S_PORTS%% *}/misnamed" \
		--cacert "$CA" --sni localhost -k sni -- touch ran
	[[ -e ran ]]
	rm ran
	# a name neither carries: the sentinels refuse it first, one line, never run
	run -69 --separate-stderr rlock -u "$S_URL" --cacert "$CA" --sni example.com \
		"${FAIL_FAST[@]}" -k sni -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'not valid for example\.com'
	[[ ! -e ran ]]
}

# mixed_sentinel_start PORT plain|tls MASTER_PORT: one sentinel on PORT that monitors
# 'mixed' at 127.0.0.1:MASTER_PORT. plain: it listens without TLS and speaks TLS to its
# master (the TLS master of this file); tls: it listens with TLS and speaks plaintext to
# its master. Waits until it names the master. Its PID is stopped by redis_stop_all.
mixed_sentinel_start() {
	local port=$1 kind=$2 mport=$3 dir c=$TLS_CERTS
	dir=$(mktemp -d "$BATS_FILE_TMPDIR/sentinel.XXXXXX")
	{
		if [[ $kind == plain ]]; then
			echo "port $port"
			echo "tls-replication yes"
		else
			printf 'port 0\ntls-port %s\ntls-auth-clients no\n' "$port"
		fi
		cat <<EOC
bind 127.0.0.1
tls-cert-file $c/server.pem
tls-key-file $c/server.key
tls-client-cert-file $c/client.pem
tls-client-key-file $c/client.key
tls-ca-cert-file $c/ca.pem
daemonize no
dir $dir
sentinel monitor mixed 127.0.0.1 $mport 1
sentinel down-after-milliseconds mixed 60000
EOC
	} >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/sentinel.log" 2>&1 3>&- 4>&- &
	remember_server "$!"
	if [[ $kind == plain ]]; then
		wait_until 30 eval "redis-cli -p $port SENTINEL get-master-addr-by-name mixed 2>/dev/null | grep -q '^$mport\$'"
	else
		wait_until 30 eval "tls_cli $port SENTINEL get-master-addr-by-name mixed 2>/dev/null | grep -q '^$mport\$'"
	fi
}

@test "TLS on the sentinels but not the master, or the reverse: 69, one line that says TLS is for both or neither, never a hint that cannot work" {
	local plain_s tls_s
	plain_s=$(free_port)
	tls_s=$(free_port)
	mixed_sentinel_start "$plain_s" plain "$M_PORT"
	redis_start
	mixed_sentinel_start "$tls_s" tls "$REDIS_PORT"
	# sentinels without TLS name a TLS master: "use rediss:// or --tls" would break
	# the sentinels' side (and rediss:// is no Sentinel URL)
	run -69 --separate-stderr rlock -u "redis-sentinel://127.0.0.1:$plain_s/mixed" \
		"${FAIL_FAST[@]}" -k mx -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "master 127\.0\.0\.1:$M_PORT"
	[[ $stderr != *'rediss://'* ]] || fail "a hint that cannot work: $stderr"
	assert_regex "$stderr" 'both or neither'
	# sentinels with TLS name a master without: "use redis://" would break theirs
	run -69 --separate-stderr rlock -u "rediss-sentinel://127.0.0.1:$tls_s/mixed" \
		--cacert "$CA" "${FAIL_FAST[@]}" -k mx -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "master 127\.0\.0\.1:$REDIS_PORT"
	[[ $stderr != *'redis://'* ]] || fail "a hint that cannot work: $stderr"
	assert_regex "$stderr" 'both or neither'
	# the sentinel itself spoken to in the wrong way: the Sentinel scheme to use
	run -69 --separate-stderr rlock -u "redis-sentinel://127.0.0.1:$tls_s/mixed" \
		"${FAIL_FAST[@]}" -k mx -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "sentinel 127\.0\.0\.1:$tls_s.*rediss-sentinel:// or --tls"
	run -69 --separate-stderr rlock -u "rediss-sentinel://127.0.0.1:$plain_s/mixed" \
		--cacert "$CA" "${FAIL_FAST[@]}" -k mx -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "sentinel 127\.0\.0\.1:$plain_s.*redis-sentinel://"
	[[ ! -e ran ]]
}

# SLOW: deadlines long enough that the sentinels' budget (n × (connect + io) + connect
# + 2 × io: 140 s here) is far past the 60 s each run below is given: a run that retried
# a fault waiting cannot fix until that budget ends is killed (124), not 69.
SLOW=(--connect-timeout 20s --io-timeout 20s)

@test "what waiting cannot fix fails at once over Sentinel too: a CA that does not verify the sentinels, a master its certificate does not name, TLS on one side only" {
	run -69 --separate-stderr timeout 60 "$RLOCK" -u "$S_URL" --cacert "$OTHER_CA" "${SLOW[@]}" \
		-k w -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Cc]ertificate|verif|issuer'
	run -69 --separate-stderr timeout 60 "$RLOCK" \
		-u "rediss-sentinel://127.0.0.1:${S_PORTS%% *}/misnamed" --cacert "$CA" "${SLOW[@]}" \
		-k w -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "[Mm]ismatch.*127\.0\.0\.2:$M_PORT|127\.0\.0\.2:$M_PORT.*[Mm]ismatch"
	local plain_s
	plain_s=$(free_port)
	mixed_sentinel_start "$plain_s" plain "$M_PORT"
	run -69 --separate-stderr timeout 60 "$RLOCK" -u "redis-sentinel://127.0.0.1:$plain_s/mixed" \
		"${SLOW[@]}" -k w -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'both or neither'
	[[ ! -e ran ]]
}
