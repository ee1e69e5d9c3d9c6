#!/usr/bin/env bats
# rlock --check (issue 24): every node behind the URL(s) is asked, read-only, whether a
# lock can be trusted there; one line per finding (ok/warn/unsafe, the fact, the fix),
# then a verdict. Exit 0 all ok, 1 warnings only, 2 unsafe, 69 unreachable. Real
# servers: the file's own (noeviction, appendonly yes, appendfsync always: the set-up
# the guarantees are stated for), and per test the one whose set-up is checked.

# shellcheck disable=SC2154  # bats sets $output, $stderr
load helpers
load sentinel
load cluster

setup_file() {
	common_setup_file --appendonly yes --appendfsync always
	export GOOD_URL=$REDIS_URL GOOD_PORT=$REDIS_PORT
}

# safe_start [ARGS...]: one more server, AOF always unless ARGS say otherwise.
safe_start() {
	redis_start --appendonly yes --appendfsync always "$@"
}

# line LEVEL CHECK REGEX: the output has a finding LEVEL ... CHECK: matching REGEX.
line() {
	grep -Eq "^$1 +[^ ]+ $2: $3" <<<"$output" || fail "no '$1 $2: $3' in: $output"
}

@test "--check: 0 on one noeviction, appendonly yes, appendfsync always master" {
	run -0 --separate-stderr rlock -u "$GOOD_URL" --check
	for c in reach version features scripts maxmemory-policy persistence replicas acl clock; do
		line ok "$c" ''
	done
	line ok reach 'answers; round trip [0-9.]+ ms \(median of 5 PINGs\)'
	# ASCII only: the output may go to a terminal or a log that is not UTF-8
	line ok clock "offset -?[0-9.]+ ms from this host's clock \(\+/-[0-9.]+ ms\)"
	if LC_ALL=C grep -q $'[\x80-\xff]' <<<"$output"; then fail "not ASCII: $output"; fi
	line ok persistence 'appendonly yes, appendfsync always'
	line ok replicas 'master, no replicas'
	assert_line --regexp '^verdict: ok \([0-9]+ ok, 0 warn, 0 unsafe\)$'
	refute_line --regexp '^(warn|unsafe) '
	[[ -z $stderr ]] || fail "stderr: $stderr"
	# it created nothing
	assert_equal "$(rcli DBSIZE)" 0
}

# product MODE: the regex of what --check must call the redis-server on PATH (the one
# the helpers start), from that binary's own --version: "Redis 7.2.6 (MODE)", "Valkey
# 8.0.1 (MODE; speaks as Redis 7.2.4)".
product() {
	local v
	v=$(redis-server --version)
	case $v in
	"Valkey server v="*)
		v=${v#Valkey server v=}
		v=${v%% *}
		echo "Valkey ${v//./\\.} \\($1; speaks as Redis 7\\.[0-9.]+\\)"
		;;
	"Redis server v="*)
		v=${v#Redis server v=}
		v=${v%% *}
		echo "Redis ${v//./\\.} \\($1\\)"
		;;
	*) fail "redis-server --version: $v" ;;
	esac
}

@test "--check names the product and its version, and what it means for rlock (WAITAOF)" {
	local want
	want=$(product standalone)
	run -0 --separate-stderr rlock -u "$GOOD_URL" --check
	line ok version "$want\$"
	if [[ $(redis-server --version) == "Valkey server v=8.0."* ]]; then
		# Valkey 8.0's WAITAOF can answer before the fsync with appendfsync everysec
		# (redis/redis#13793; test/faults/run's aof-crash rows saw it on 8.0.1)
		line ok features 'WAITAOF, but with appendfsync everysec it can answer before the fsync \(redis/redis#13793\): --wait-aof needs appendfsync always here$'
		run -0 --separate-stderr rlock -u "$GOOD_URL" --wait-aof 1 --check
		line ok persistence 'appendonly yes, appendfsync always'
		redis_start --appendonly yes --appendfsync everysec
		run -2 --separate-stderr rlock -u "$REDIS_URL" --wait-aof 1 --check
		line unsafe persistence 'appendonly yes, appendfsync everysec, and this version.s WAITAOF can answer before the fsync'
		run -1 --separate-stderr rlock -u "$REDIS_URL" --check
		line warn persistence 'appendonly yes, appendfsync everysec: '
		redis_stop "$REDIS_PID"
	elif [[ $(rcli COMMAND INFO WAITAOF | head -1) == waitaof ]]; then
		line ok features 'WAITAOF: --wait-aof can make a grant survive a restart$'
		# --wait-aof on a master with appendonly yes: nothing against it
		run -0 --separate-stderr rlock -u "$GOOD_URL" --wait-aof 1 --check
		line ok features 'WAITAOF: '
		line ok persistence 'appendonly yes, appendfsync always'
		redis_start --appendonly yes --appendfsync everysec
		run -1 --separate-stderr rlock -u "$REDIS_URL" --wait-aof 1 --check
		line warn persistence 'appendonly yes, appendfsync everysec: '
		redis_stop "$REDIS_PID"
	else
		line ok features 'no WAITAOF \(7\.2\): --wait-aof is refused \(exit 69\)$'
		run -2 --separate-stderr rlock -u "$GOOD_URL" --wait-aof 1 --check
		line unsafe features 'Redis [0-9.]+ has no WAITAOF: with --wait-aof every run exits 69 before its command; fix: Redis 7\.2 or later, or Valkey; or drop --wait-aof$'
		assert_line --regexp '^verdict: unsafe \([0-9]+ ok, 0 warn, 1 unsafe\)$'
	fi
	# --wait-aof where appendonly is off: every run would be refused
	redis_start
	run -2 --separate-stderr rlock -u "$REDIS_URL" --wait-aof 1 --check
	line unsafe persistence 'appendonly no: with --wait-aof every run exits 69 before its command; fix: CONFIG SET appendonly yes'
	redis_stop "$REDIS_PID"
}

@test "--check --json: one object that parses, the same findings" {
	run -0 --separate-stderr rlock -u "$GOOD_URL" --check --json
	jq -e '.schema == 1 and .verdict == "ok" and .exit == 0 and .unsafe == 0 and
		(.findings | length) >= 8 and
		all(.findings[]; .level == "ok" and (.node | type) == "string" and
			(.fact | type) == "string")' <<<"$output"
}

@test "--check: 2 on maxmemory-policy allkeys-lru" {
	safe_start --maxmemory-policy allkeys-lru
	run -2 rlock -u "$REDIS_URL" --check
	line unsafe maxmemory-policy 'allkeys-lru: .*evicted.*; fix: CONFIG SET maxmemory-policy noeviction'
	assert_line --regexp '^verdict: unsafe \([0-9]+ ok, 0 warn, 1 unsafe\)$'
	run -2 rlock -u "$REDIS_URL" --check --json
	jq -e '.verdict == "unsafe" and .exit == 2 and
		([.findings[] | select(.level == "unsafe") | .check] == ["maxmemory-policy"])' <<<"$output"
	redis_stop "$REDIS_PID"
}

@test "--check: a warning (1) for RDB only, with the window; and for appendfsync everysec" {
	redis_start --save '60 1'
	run -1 rlock -u "$REDIS_URL" --check
	line warn persistence 'RDB snapshots only \(save 60 1\): .*up to 60 s.*; fix: .*appendonly yes'
	assert_line --regexp '^verdict: warn \([0-9]+ ok, 1 warn, 0 unsafe\)$'
	rcli CONFIG SET appendonly yes >/dev/null
	rcli CONFIG SET appendfsync everysec >/dev/null
	run -1 rlock -u "$REDIS_URL" --check
	line warn persistence 'appendonly yes, appendfsync everysec: .*1 s'
	# no persistence at all: a restart empties it (a guarantee cannot hold)
	rcli CONFIG SET appendonly no >/dev/null
	rcli CONFIG SET save '' >/dev/null
	run -2 rlock -u "$REDIS_URL" --check
	line unsafe persistence 'none'
	redis_stop "$REDIS_PID"
}

@test "--check: a replica as the URL is unsafe; the master's replicas need --wait-replicas" {
	safe_start
	local mport=$REDIS_PORT mpid=$REDIS_PID
	safe_start --replicaof 127.0.0.1 "$mport"
	local rport=$REDIS_PORT rpid=$REDIS_PID
	wait_until 30 sh -c "redis-cli -p $rport INFO replication | grep -q master_link_status:up"
	wait_until 30 sh -c "redis-cli -p $mport INFO replication | grep -q connected_slaves:1"
	run -2 rlock -u "redis://127.0.0.1:$rport" --check
	line unsafe role "a replica \(of 127\.0\.0\.1:$mport\).*; fix: give the master's URL"
	run -1 rlock -u "redis://127.0.0.1:$mport" --check
	line warn replicas 'master, 1 replica\(s\), min-replicas-to-write 0 and no --wait-replicas'
	run -0 rlock -u "redis://127.0.0.1:$mport" --wait-replicas 1 --check
	line ok replicas 'master, 1 replica\(s\); --wait-replicas is given'
	redis-cli -p "$mport" CONFIG SET min-replicas-to-write 1 >/dev/null
	run -0 rlock -u "redis://127.0.0.1:$mport" --check
	line ok replicas '.*; min-replicas-to-write is set'
	redis_stop "$rpid"
	redis_stop "$mpid"
}

@test "--check: lists the rights an ACL user lacks (ACL DRYRUN, and tried without it)" {
	# a real lock whose name the trial's throwaway key must not touch
	rcli SET 'rlock:{rlock-check}' keep >/dev/null
	rcli ACL SETUSER nosha on '>pw-1' '~*' '&*' '+@all' '-evalsha' >/dev/null
	# incr and hset: refused inside the scripts (Redis 7.0 says so without NOPERM)
	rcli ACL SETUSER noacl on '>pw-1' '~*' '&*' '+@all' '-evalsha' '-incr' '-hset' '-blpop' '-acl' '-config' >/dev/null
	printf 'pw-1\n' >pw
	chmod 600 pw
	run -2 rlock -u "$GOOD_URL" --user nosha --password-file pw --check
	line unsafe acl "user 'nosha' lacks evalsha \(ACL DRYRUN\).*; fix: ACL SETUSER nosha \+evalsha$"
	run -2 rlock -u "$GOOD_URL" --user noacl --password-file pw --check
	line unsafe acl "user 'noacl' lacks evalsha, incr, hset, blpop \(tried on a throwaway key\).*; fix: ACL SETUSER noacl \+evalsha \+incr \+hset \+blpop$"
	# CONFIG GET refused: persistence cannot be told, a warning
	line warn persistence 'cannot tell: CONFIG GET refused'
	refute_output --partial 'pw-1'
	# no PUBLISH: the scripts' wake-ups are best effort (redis.pcall), a warning only
	rcli ACL SETUSER nopub on '>pw-1' '~*' '&*' '+@all' '-publish' >/dev/null
	run -1 rlock -u "$GOOD_URL" --user nopub --password-file pw --check
	line warn acl "user 'nopub' lacks publish \(ACL DRYRUN\): .*a slower hand-off; fix: ACL SETUSER nopub \+publish$"
	rcli ACL DELUSER nopub >/dev/null
	# the trial left nothing behind, and changed nothing it did not create
	assert_equal "$(rcli DBSIZE)" 1
	assert_equal "$(rcli GET 'rlock:{rlock-check}')" keep
	rcli ACL DELUSER nosha noacl >/dev/null
}

@test "--check: a user whose key or channel patterns leave rlock's out is told the patterns to add, not commands it has" {
	# ACL DRYRUN denies a command for its name, its keys or its channels (Redis 7 gives a
	# new user no channel: acl-pubsub-default resetchannels): +evalsha +get ... would
	# change nothing for a user who has them all but not the names under the prefix
	local user fix
	rcli ACL SETUSER appkeys on '>pw-1' '~app:*' '&*' '+@all' >/dev/null
	rcli ACL SETUSER nochan on '>pw-1' '~*' resetchannels '+@all' >/dev/null
	rcli ACL SETUSER mixed on '>pw-1' '~app:*' resetchannels '+@all' '-evalsha' >/dev/null
	printf 'pw-1\n' >pw
	chmod 600 pw
	run -2 rlock -u "$GOOD_URL" --user appkeys --password-file pw --check
	line unsafe acl "user 'appkeys' may not access the keys rlock:[*] [(]ACL DRYRUN[)].*; fix: ACL SETUSER appkeys ~rlock:[*]$"
	# no channel: the scripts' wake-ups are best effort (redis.pcall), nothing unsafe
	run -1 rlock -u "$GOOD_URL" --user nochan --password-file pw --check
	line warn acl "user 'nochan' may not use the channels rlock:[*] [(]ACL DRYRUN[)]: .*own timer, a slower hand-off; fix: ACL SETUSER nochan &rlock:[*]$"
	run -2 rlock -u "$GOOD_URL" --user mixed --password-file pw --prefix 'my*app:' --check
	line unsafe acl "user 'mixed' lacks evalsha, may not access the keys [^ ]+, may not use the channels [^ ]+ [(]ACL DRYRUN[)]"
	# the fix given works: with it, every right (a prefix's '*' taken literally)
	for user in appkeys nochan mixed; do
		local prefix=()
		[[ $user != mixed ]] || prefix=(--prefix 'my*app:')
		run rlock -u "$GOOD_URL" --user "$user" --password-file pw "${prefix[@]}" --check
		local want=2 # no channel: a warning (1)
		[[ $user != nochan ]] || want=1
		((status == want)) || fail "$user: --check $status: $output"
		fix=$(sed -En 's/^(unsafe|warn) .* acl: .*; fix: ACL SETUSER //p' <<<"$output")
		[[ -n $fix ]] || fail "$user: no fix in: $output"
		# shellcheck disable=SC2086  # the fix's words: a user and patterns, no spaces
		rcli ACL SETUSER $fix >/dev/null
		run -0 rlock -u "$GOOD_URL" --user "$user" --password-file pw "${prefix[@]}" --check
		line ok acl "user '$user' has the rights rlock uses"
	done
	rcli ACL GETUSER mixed | grep -qF '~my[*]app:*' || fail "not the literal pattern: $(rcli ACL GETUSER mixed)"
	rcli ACL DELUSER appkeys nochan mixed >/dev/null
}

@test "--check: reports a clock offset injected into the server (clock-shift shim)" {
	cc -shared -fPIC -o clockshift.so "$RLOCK_SOURCE_DIR/test/faults/clockshift.c" -ldl
	echo 120 >clockshift
	LD_PRELOAD=$PWD/clockshift.so CLOCKSHIFT_FILE=$PWD/clockshift safe_start
	run -1 rlock -u "$REDIS_URL" --check
	line warn clock "the server's clock is 1[12][0-9]\.[0-9] s ahead of this host's.*; fix: run NTP"
	assert_line --regexp '^verdict: warn \([0-9]+ ok, 1 warn, 0 unsafe\)$'
	redis_stop "$REDIS_PID"
}

# time_calls N: the server (direct, not through the proxy) has answered N TIMEs.
time_calls() {
	[[ $(rcli INFO commandstats | sed -n 's/^cmdstat_time:calls=\([0-9]*\),.*/\1/p') -ge $1 ]]
}

@test "--check: a server clock that steps during the check is reported" {
	cc -shared -fPIC -o clockshift.so "$RLOCK_SOURCE_DIR/test/faults/clockshift.c" -ldl
	echo 0 >clockshift
	LD_PRELOAD=$PWD/clockshift.so CLOCKSHIFT_FILE=$PWD/clockshift safe_start
	# every request 100 ms late: the check's first and last TIMEs are seconds apart
	delay_proxy_start 100 "$REDIS_PORT"
	"$RLOCK" -u "$PROXY_URL" --check >out 2>&1 &
	local pid=$!
	track_pid "$pid"
	wait_until 60 time_calls 3 # the first clock samples are taken
	echo 30 >clockshift         # the server's clock steps 30 s ahead
	local st=0
	wait "$pid" || st=$?
	output=$(cat out)
	((st == 1)) || fail "exit $st: $output"
	line warn clock 'the offset moved by (29|30)[0-9]{3}\.[0-9] ms during the check.*; fix: run NTP'
	redis_stop "$REDIS_PID"
}

@test "--check over TLS, with the run's TLS options" {
	tls_make_certs "$BATS_TEST_TMPDIR/certs"
	tls_redis_start --appendonly yes --appendfsync always
	run -0 rlock -u "rediss://127.0.0.1:$TLS_PORT" --cacert "$TLS_CERTS/ca.pem" --check
	assert_line --regexp "^ok +127\.0\.0\.1:$TLS_PORT reach: "
	line ok tls 'the servers. certificate chains and host names are verified'
	# --insecure works, and is a finding of its own: who answered is not known
	run -1 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_PORT" --insecure --check
	line warn tls 'the servers. certificates are not verified \(--insecure\).*; fix: give --cacert'
	run -1 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_PORT" --insecure --check --json
	assert_output --partial '"check":"tls"'
	run -69 rlock -u "rediss://127.0.0.1:$TLS_PORT" --check # the system's CAs: refused
	line unsafe reach ''
	redis_stop "$TLS_PID"
}

@test "--check over Sentinel: the master the sentinels name is checked" {
	sentinel_topology_start
	local m
	m=$(sentinel_master_port)
	run -2 rlock -u "$SENT_URL" --check
	line ok reach '' # the master answered
	assert_line --regexp "^ok +127\.0\.0\.1:$m reach: "
	line ok topology "Sentinel 'mymaster' names 127\.0\.0\.1:$m as master"
	line warn replicas 'master, 1 replica'
	line unsafe persistence 'none'
	[[ $(grep -c ' reach: ' <<<"$output") == 1 ]]
}

# lone_sentinel PORT: a sentinel on PORT that monitors nothing.
lone_sentinel() {
	local dir
	dir=$(mktemp -d "$BATS_FILE_TMPDIR/sentinel.XXXXXX")
	printf 'port %s\nbind 127.0.0.1\ndaemonize no\ndir %s\n' "$1" "$dir" >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/sentinel.log" 2>&1 3>&- 4>&- &
	remember_server "$!"
	wait_until 20 _redis_is "$!" -p "$1"
}

# check_says LEVEL CHECK REGEX: --check over $URL (exit 1 or 2) has that finding.
check_says() {
	local out st=0
	out=$("$RLOCK" -u "$URL" --check 2>/dev/null) || st=$?
	((st == 1 || st == 2)) && grep -Eq "^$1 +[^ ]+ $2: $3" <<<"$out"
}

# all_sentinels_ok MASTER_PORT: --check over $SENT_URL says OK 3 usable for each sentinel.
all_sentinels_ok() {
	local out p
	out=$("$RLOCK" -u "$SENT_URL" --check 2>/dev/null) || true
	for p in $SENT_PORTS; do
		grep -Eq "^ok +127\.0\.0\.1:$p sentinel: knows master 'mymaster' at 127\.0\.0\.1:$1; CKQUORUM: OK 3 usable Sentinels" <<<"$out" || return 1
	done
}

@test "--check over Sentinel: the sentinels themselves (answered, master known, CKQUORUM); a quorum out of reach is a warning" {
	sentinel_topology_start
	local m p lone
	m=$(sentinel_master_port)
	# the sentinels find each other by hello messages (every 2 s): wait until each
	# counts all three (on a loaded machine that took longer than the topology's start)
	for p in $SENT_PORTS; do
		wait_until 30 sh -c "redis-cli -p $p SENTINEL CKQUORUM mymaster | grep -q '^OK 3 usable'"
	done
	# rlock says so of each: polled, as with down-after-milliseconds 1000 a loaded
	# machine can make a sentinel count another one down for a moment (CI saw
	# "NOQUORUM 1 usable" in one --check right after all three had said "OK 3")
	wait_until 30 all_sentinels_ok "$m"
	run -2 rlock -u "$SENT_URL" --check
	line ok sentinels "3 of 3 sentinels answered, 3 know master 'mymaster'$"
	# One more sentinel in the URL that monitors nothing, one that does not answer.
	lone=$(free_port)
	lone_sentinel "$lone"
	URL="redis-sentinel://127.0.0.1:${SENT_PORTS// /,127.0.0.1:},127.0.0.1:$lone,127.0.0.1:$(dead_port)/mymaster"
	run -2 rlock -u "$URL" --check
	line warn sentinel "does not know master 'mymaster'"
	assert_line --regexp "^warn +127\.0\.0\.1:$lone sentinel: does not know master 'mymaster'"
	line warn sentinel 'sentinel 127\.0\.0\.1:[0-9]+: connect to .*Connection refused'
	line warn sentinels "4 of 5 sentinels answered, 3 know master 'mymaster'"
	# Two of the three sentinels of the master gone: the last one cannot reach the quorum
	# (2) once it sees them down (1 s).
	local ports
	read -r -a ports <<<"$SENT_PORTS"
	kill -KILL "${SENT_PIDS[0]}" "${SENT_PIDS[1]}"
	URL=$SENT_URL
	wait_until 30 check_says warn sentinel "knows master 'mymaster' at 127\.0\.0\.1:$m; CKQUORUM: NOQUORUM .*\(a failover cannot be authorized\)"
	run -2 rlock -u "$URL" --check
	assert_line --regexp "^warn +127\.0\.0\.1:${ports[2]} sentinel: knows master .*NOQUORUM"
	line warn sentinels "1 of 3 sentinels answered, 1 know master 'mymaster'"
}

@test "--check over Cluster: every master is checked" {
	cluster_start
	run -2 rlock -u "$REDIS_URL" --check
	local p
	for p in $(cluster_masters); do
		assert_line --regexp "^ok +127\.0\.0\.1:$p reach: "
		assert_line --regexp "^ok +127\.0\.0\.1:$p cluster: cluster_state ok, 3 master"
		assert_line --regexp "^ok +127\.0\.0\.1:$p version: $(product cluster)$"
	done
	line ok topology 'Cluster: 3 of 3 masters reachable'
	[[ $(grep -c ' reach: ' <<<"$output") == 3 ]]
}

@test "--check over three Redlock nodes: each node; a node down is a warning" {
	local urls="" pids=() _
	for _ in 1 2 3; do
		safe_start
		urls+="${urls:+,}$REDIS_URL"
		pids+=("$REDIS_PID")
	done
	run -0 rlock -u "$urls" --check
	[[ $(grep -c '^ok .* reach: ' <<<"$output") == 3 ]]
	[[ $(grep -cE "^ok .* version: $(product standalone)$" <<<"$output") == 3 ]]
	line ok topology 'Redlock: 3 of 3 nodes reachable'
	redis_stop "${pids[2]}"
	run -1 rlock -u "$urls" --check
	line warn reach ''
	line warn topology 'Redlock: 2 of 3 nodes reachable'
	redis_stop "${pids[1]}"
	run -2 rlock -u "$urls" --check
	line unsafe topology 'Redlock: 1 of 3 nodes reachable'
	# one server named twice (TCP and its Unix socket) is one vote
	safe_start --unixsocket "$BATS_TEST_TMPDIR/r.sock"
	run -64 rlock -u "${urls%%,*},$REDIS_URL,unix://$BATS_TEST_TMPDIR/r.sock" --check
	assert_line --regexp '^unsafe .* reach: Redlock nodes must be distinct servers: .* are the same server'
	assert_line --regexp '^verdict: bad-url '
	redis_stop "$REDIS_PID"
	redis_stop "${pids[0]}"
}

@test "--check judges Redlock nodes' URLs by the run's rule: a database a node lacks is bad-url (64), not a node down (warn)" {
	local urls bad pid
	safe_start
	bad=$REDIS_PORT pid=$REDIS_PID
	safe_start
	# /99: past the server's 16 databases (a Cluster node's /2 is the same rule)
	urls="$GOOD_URL,$REDIS_URL,redis://127.0.0.1:$bad/99"
	run -64 --separate-stderr rlock -u "$urls" -k db -- touch ran
	assert_regex "$stderr" "database 99 in the URL: 127\.0\.0\.1:$bad has no such database"
	run -64 --separate-stderr rlock -u "$urls" --check
	assert_line --regexp "^unsafe .* reach: database 99 in the URL: 127\.0\.0\.1:$bad has no such database"
	assert_line --regexp '^verdict: bad-url '
	run -64 --separate-stderr rlock -u "$urls" --check --json
	jq -e '.verdict == "bad-url" and .exit == 64' <<<"$output"
	[[ ! -e ran ]]
	redis_stop "$REDIS_PID"
	redis_stop "$pid"
}

@test "--check: a server busy running a script (BUSY) is said so, its fix not the credentials'; a password for a server that has none: bad-url (64), its fix the password" {
	safe_start --busy-reply-threshold 50
	local port=$REDIS_PORT pid
	redis-cli -p "$port" EVAL 'while true do end' 0 >/dev/null 2>&1 &
	pid=$!
	track_pid "$pid"
	wait_until 10 eval "redis-cli -p $port PING | grep -q BUSY"
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$port" --check
	line unsafe reach 'PING: BUSY .*; fix: a script runs on the server: check again once it ends \(or SCRIPT KILL\)$'
	redis-cli -p "$port" SCRIPT KILL >/dev/null
	wait_until 10 proc_gone "$pid"
	RLOCK_PASSWORD=nopass-pw run -64 --separate-stderr rlock -u "redis://127.0.0.1:$port" --check
	line unsafe reach "127\.0\.0\.1:$port has no password set, yet rlock was given one .*; fix: give the password of the server meant, or none for a server that has none"
	assert_line --regexp '^verdict: bad-url '
	[[ $output != *nopass-pw* ]]
}

@test "--check: commands renamed away (rename-command) that rlock sends or its scripts call are named: unsafe when needed, a warning when not" {
	safe_start --rename-command EVALSHA '' --rename-command INCR ''
	run -2 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" --check
	line unsafe scripts 'the server does not know EVALSHA, INCR, which rlock needs \(renamed or disabled with rename-command\): no lock can be taken; fix: give these commands their names back'
	redis_stop "$REDIS_PID"
	safe_start --rename-command PUBLISH ''
	run --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" --check
	line warn scripts 'the server does not know PUBLISH, which rlock uses'
	redis_stop "$REDIS_PID"
}

@test "--check: 69 when unreachable; bad combinations are usage errors" {
	local port
	port=$(dead_port)
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$port" --check
	line unsafe reach "connect to 127\.0\.0\.1:$port"
	assert_line --regexp '^verdict: unreachable '
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$port" --check --json
	jq -e '.verdict == "unreachable" and .exit == 69' <<<"$output"
	run -64 --separate-stderr rlock -u "$GOOD_URL" -k x --check
	assert_one_line_error "$stderr" 'takes no -k NAME'
	run -64 --separate-stderr rlock -u "$GOOD_URL" --check -- true
}
