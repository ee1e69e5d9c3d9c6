#!/usr/bin/env bats
# shellcheck disable=SC2154  # bats sets $stderr, $output
# Issue 27 part A, item 1: waiting includes the server. Within the wait budget (-w, or
# forever), a server that cannot serve yet (refused, paused, loading) is retried until
# the deadline, with one line when the outage starts and one when it ends; errors that
# time cannot fix (a wrong password, a peer that is not Redis) fail at once; -n fails
# at once.

load helpers

# blip_start PORT [ARGS...]: a redis-server on PORT (started later than rlock by the
# test, or with ARGS such as a --replicaof that makes it refuse writes).
blip_start() {
	local dir=$BATS_TEST_TMPDIR/late port=$1
	shift
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$dir" "$@" </dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
	BLIP_PID=$!
	remember_server "$BLIP_PID"
	track_pid "$BLIP_PID"
}

# blip_serve [ARGS...]: blip_start on a free port, done once the server answering there
# is the one started (BLIP_PORT, BLIP_PID); on another port when that one was taken
# meanwhile (its server died: the port is someone else's).
blip_serve() {
	local attempt st
	for ((attempt = 0; attempt < 5; attempt++)); do
		BLIP_PORT=$(free_port) || return 1
		blip_start "$BLIP_PORT" "$@"
		st=0
		_await_server blip_serve "$BLIP_PID" "$BATS_TEST_TMPDIR/late" \
			_redis_is "$BLIP_PID" -p "$BLIP_PORT" || st=$?
		((st == 2)) || return "$st"
	done
	echo "blip_serve: no port kept its server in 5 tries" >&2
	return 1
}

# outage_said FILE: the outage's first line is on stderr (rlock is retrying).
outage_said() { grep -q "; retrying" "$1"; }

# ran_after_outage NAME SERVER WHY: the background rlock ran its command after an
# outage it said in two lines, one when it started (WHY) and one when it ended, not
# one per try.
ran_after_outage() {
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e ran ]] || fail "the job did not run"
	run cat "$RLOCK_ERR"
	assert_line --index 0 --regexp "^rlock: lock '$1': $3; retrying for up to [0-9.]+ s \(--wait\)$"
	assert_line --index 1 --regexp "^rlock: lock '$1': $2 answers again after [0-9.]+ s$"
	assert_equal "${#lines[@]}" 2
}

@test "a server started after the run began: the wait rides it out, the job runs" {
	local port
	port=$(dead_port)
	rlock_bg -w 10s -u "redis://127.0.0.1:$port" -k b -- touch ran
	wait_until 10 outage_said "$RLOCK_ERR"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	blip_start "$port"
	ran_after_outage b "127\.0\.0\.1:$port" "connect to 127\.0\.0\.1:$port: Connection refused"
}

@test "a paused server (SIGSTOP) resumed inside the budget: the job runs" {
	kill -STOP "$REDIS_PID"
	rlock_bg -w 20s --io-timeout 500ms -k p -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR"
	kill -CONT "$REDIS_PID"
	ran_after_outage p "127\.0\.0\.1:$REDIS_PORT" "127\.0\.0\.1:$REDIS_PORT did not answer [A-Z]+ in time"
}

@test "a release the paused server answers late, its scripts flushed (NOSCRIPT): sent again whole (EVAL) right behind, it runs when the server wakes; no lock kept for its ttl" {
	run -0 --separate-stderr rlock -t 30s --io-timeout 300ms -k nf -- sh -c "redis-cli -p $REDIS_PORT SCRIPT FLUSH >/dev/null && kill -STOP $REDIS_PID"
	kill -CONT "$REDIS_PID"
	wait_until 5 key_absent 'rlock:{nf}' || fail "the lock is kept: PTTL $(rcli PTTL 'rlock:{nf}')"
}

@test "a server that cannot serve yet (READONLY: a replica) is retried until it can: the job runs" {
	local port
	blip_serve --replicaof 127.0.0.1 "$(dead_port)"
	port=$BLIP_PORT
	rlock_bg -w 20s -u "redis://127.0.0.1:$port" -k r -- touch ran
	wait_until 10 outage_said "$RLOCK_ERR"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	redis-cli -p "$port" REPLICAOF NO ONE >/dev/null
	ran_after_outage r "127\.0\.0\.1:$port" "127\.0\.0\.1:$port: server error: READONLY .*"
}

@test "-w 2s with the server down: 69 once the wait ran out, not before" {
	local port t0 took
	port=$(dead_port)
	t0=$(now_ms)
	run -69 --separate-stderr rlock -w 2s -u "redis://127.0.0.1:$port" -k d -- touch ran
	took=$(($(now_ms) - t0))
	[[ ! -e ran ]]
	((took >= 1900)) || fail "gave up after $took ms, before the 2 s wait"
	echo "# server down, -w 2s: 69 after $took ms" >&3
	assert_regex "${stderr_lines[0]}" "^rlock: lock 'd': connect to .*; retrying for up to"
	assert_regex "${stderr_lines[1]}" "^rlock: lock 'd': Redis unavailable for the whole wait \(gave up at the --wait deadline after [0-9.]+ s\): connect to 127\.0\.0\.1:$port: Connection refused$"
	[[ ${#stderr_lines[@]} == 2 ]] || fail "$stderr"
}

@test "-w against a frozen server (SIGSTOP): 69 at the deadline, not an io-timeout later; no negative duration" {
	local w t0 took
	rlock -k f -- true # the connection works, the scripts are cached
	kill -STOP "$REDIS_PID"
	# a frozen server accepts connections (the kernel does) and never answers: every
	# wait (connect, reply, backoff, the give-back of an unanswered acquire) must end
	# within what is left of -w (main overshot by 1.6 s to 2 s with the default 2 s
	# --io-timeout: the first attempt waited its whole --io-timeout). A 10 s one here,
	# so that the bound is well under what it would add and well over what a slow
	# machine adds to the -w (rlock's start and exit: 130 ms here under asan).
	for w in 1000 3000; do
		t0=$(now_ms)
		run -69 --separate-stderr rlock -v --io-timeout 10s -w "${w}ms" -k f -- touch ran
		took=$(($(now_ms) - t0))
		echo "# frozen server, -w ${w}ms: 69 after $took ms" >&3
		((took >= w - 50)) || fail "-w ${w}ms: gave up after $took ms, before the deadline: $stderr"
		((took < w + 3000)) || fail "-w ${w}ms: gave up after $took ms: $stderr"
		[[ ! $stderr =~ -[0-9.]+\ ?(s|ms)([^a-z]|$) ]] || fail "a negative duration: $stderr"
		[[ ! $stderr =~ after\ 0\ ms ]] || fail "a timeout of 0 ms: $stderr"
	done
	[[ ! -e ran ]]
	kill -CONT "$REDIS_PID"
}

@test "-w against a frozen server under an inherited token of the name: 69 at the deadline (asking what is inherited is part of the wait)" {
	local t0 took
	rlock -k f -- true # the connection works, the scripts are cached
	kill -STOP "$REDIS_PID"
	# a nested run asks the server whether its variables hold the name: one io-timeout
	# (here 5 s) that the 1 s wait did not bound
	t0=$(now_ms)
	RLOCK_KEY='rlock:{f}' RLOCK_TOKEN=0123456789abcdef0123456789abcdef \
		run -69 --separate-stderr rlock --io-timeout 5s -w 1s -k f -- touch ran
	took=$(($(now_ms) - t0))
	kill -CONT "$REDIS_PID"
	echo "# frozen server, inherited token, -w 1s: 69 after $took ms" >&3
	[[ ! -e ran ]]
	((took >= 950)) || fail "gave up after $took ms, before the deadline: $stderr"
	# well under the 5 s io-timeout that was not bounded (5 s or more), well over what a
	# slow machine adds to the 1 s
	((took < 4000)) || fail "gave up after $took ms, an io-timeout past the 1 s wait: $stderr"
}

# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }

# The backoff between tries grows to seconds (2 s between connects, 5 s between
# attempts): a pause that would run into the deadline ends LAST_TRY_MS (250 ms) before
# it, so a server back shortly before the deadline is tried. Before, the pause ran to the
# deadline and rlock gave up without trying ("unavailable for the whole wait"). Each
# case runs three times: the backoff is jittered, and a lucky try may land late.

@test "a server started 650 ms before the -w deadline is connected to by a last try: the job runs" {
	local i port t0
	for i in 1 2 3; do
		port=$(dead_port)
		t0=$(now_ms)
		rlock_bg -w 3s -u "redis://127.0.0.1:$port" -k "late$i" -- touch "ran$i"
		wait_until 10 past $((t0 + 2350))
		blip_start "$port"
		rlock_wait "$RLOCK_PID" 15
		[[ -e ran$i ]] || fail "try $i: the server was back before the deadline, rlock gave up ($RLOCK_STATUS): $(cat "$RLOCK_ERR")"
		assert_equal "$RLOCK_STATUS" 0
		redis_stop "$BLIP_PID"
	done
}

@test "a server that serves again (READONLY ends) 800 ms before the -w deadline is found by a last attempt: the job runs" {
	local i port t0
	blip_serve --replicaof 127.0.0.1 "$(dead_port)"
	port=$BLIP_PORT
	for i in 1 2 3; do
		redis-cli -p "$port" REPLICAOF 127.0.0.1 "$(dead_port)" >/dev/null
		t0=$(now_ms)
		rlock_bg -w 7s -u "redis://127.0.0.1:$port" -k "ro$i" -- touch "ran$i"
		wait_until 10 outage_said "$RLOCK_ERR"
		wait_until 10 past $((t0 + 6200))
		redis-cli -p "$port" REPLICAOF NO ONE >/dev/null
		rlock_wait "$RLOCK_PID" 15
		[[ -e ran$i ]] || fail "try $i: the server served before the deadline, rlock gave up ($RLOCK_STATUS): $(cat "$RLOCK_ERR")"
		assert_equal "$RLOCK_STATUS" 0
	done
}

@test "waiting for an unreachable server without -w (a typo in the port): a periodic line says what it tries, for how long, the last error" {
	local port
	port=$(dead_port)
	rlock_bg -u "redis://127.0.0.1:$port" -k typo -- touch ran
	local pid=$RLOCK_PID err=$RLOCK_ERR
	# first line at once, then after 10 s (as a busy lock's "still waiting")
	wait_until 40 grep -q 'still waiting' "$err"
	assert_regex "$(cat "$err")" "rlock: still waiting for 'typo' after 1[0-9]s: Redis unreachable, [0-9]+ tries; last: connect to 127\.0\.0\.1:$port: Connection refused \(retrying; no --wait deadline\)"
	kill -TERM "$pid"
	rlock_wait "$pid" 20
	[[ ! -e ran ]]
}

@test "-n with the server down fails at once (69, one line)" {
	local port
	port=$(dead_port)
	run -69 --separate-stderr rlock -n -u "redis://127.0.0.1:$port" -k d -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" "Connection refused"
}

@test "a wrong password fails at once, even with a long wait" {
	local t0 took
	rcli ACL SETUSER blipuser on '>right-pw' '~*' '&*' '+@all' >/dev/null
	t0=$(now_ms)
	RLOCK_PASSWORD=wrong-pw run -69 --separate-stderr rlock -w 60s --user blipuser -k a -- touch ran
	took=$(($(now_ms) - t0))
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" "authentication to 127\.0\.0\.1:$REDIS_PORT failed"
	((took < 30000)) || fail "a wrong password waited $took ms"
}

@test "a peer that is not Redis (an HTTP server) fails at once, once, naming host:port" {
	local port
	port=$(free_port)
	perl "$BATS_TEST_DIRNAME/hostile-server.pl" "$port" http "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	wait_until 10 test -e "$BATS_TEST_TMPDIR/ready"
	run -69 --separate-stderr rlock -w 60s -u "redis://127.0.0.1:$port" -k h -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
	assert_equal "$stderr" "rlock: 127.0.0.1:$port: protocol error: Protocol error, got \"H\" as reply type byte: is this a Redis server?"
}

# busy_now PORT / loading_now PORT: the server on PORT answers BUSY (a script runs) /
# LOADING (it loads its dataset).
busy_now() { [[ $(redis-cli -p "$1" PING 2>&1) == BUSY* ]]; }
loading_now() { [[ $(redis-cli -p "$1" PING 2>&1) == LOADING* ]]; }

@test "a server busy running a script (BUSY) is waited out, db 0 (the acquire) and db 1 (SELECT): both jobs run after SCRIPT KILL" {
	local port r1 e1
	blip_serve --busy-reply-threshold 100
	port=$BLIP_PORT
	# a script that never ends on its own (its client gets an error when it is killed)
	(exec 3>&- 4>&- redis-cli -p "$port" EVAL 'while true do end' 0 >busy.out 2>&1) &
	track_pid $!
	wait_until 10 busy_now "$port"
	rlock_bg -w 60s -u "redis://127.0.0.1:$port/1" -k b1 -- touch ran1
	r1=$RLOCK_PID e1=$RLOCK_ERR
	rlock_bg -w 60s -u "redis://127.0.0.1:$port" -k b0 -- touch ran
	wait_until 20 outage_said "$e1" || fail "rlock (db 1): $(cat "$e1")"
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock (db 0): $(cat "$RLOCK_ERR")"
	proc_alive "$r1" || fail "rlock (db 1) gave up: $(cat "$e1")"
	proc_alive "$RLOCK_PID" || fail "rlock (db 0) gave up: $(cat "$RLOCK_ERR")"
	redis-cli -p "$port" SCRIPT KILL >/dev/null
	ran_after_outage b0 "127\.0\.0\.1:$port" "127\\.0\\.0\\.1:$port: acquire: server error: BUSY .*"
	rlock_wait "$r1" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e ran1 ]] || fail "the db 1 job did not run"
	grep -q "SELECT 1 on 127.0.0.1:$port failed: BUSY .*; retrying" "$e1"
}

@test "a server loading its dataset (LOADING) is waited out: the job runs once it has loaded" {
	local port
	blip_serve --enable-debug-command local
	port=$BLIP_PORT
	redis-cli -p "$port" DEBUG POPULATE 5000 >/dev/null
	redis-cli -p "$port" SAVE >/dev/null
	redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait_until 10 proc_gone "$BLIP_PID"
	# The same dump again, 2 ms per key (10 s), answering LOADING meanwhile.
	blip_start "$port" --key-load-delay 2000 --loading-process-events-interval-bytes 1024
	wait_until 10 loading_now "$port"
	rlock_bg -w 120s -u "redis://127.0.0.1:$port" -k ld -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR"
	# (a progress line may come between the outage's two: loading takes 10 s)
	rode_out_outage ld "127\.0\.0\.1:$port" "127\.0\.0\.1:$port: server error: LOADING .*"
}

@test "a waiter whose server goes away: 69 at the -w deadline naming the server's last error, not 'not tried: no time left'" {
	local port holder
	blip_serve
	port=$BLIP_PORT
	rlock_bg -u "redis://127.0.0.1:$port" -k gone -- sh -c 'until [ -e go ]; do sleep 0.05; done'
	holder=$RLOCK_PID
	wait_until 10 held_at "$port" gone
	rlock_bg -w 3s -u "redis://127.0.0.1:$port" -k gone -- touch ran
	wait_until 10 waiting_at "$port" gone
	redis_stop "$BLIP_PID"
	touch go
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 69
	[[ ! -e ran ]]
	run cat "$RLOCK_ERR"
	assert_line --index 0 --regexp "^rlock: lock 'gone': connect to 127\.0\.0\.1:$port: Connection refused; retrying for up to [0-9.]+ s \(--wait\)$"
	assert_line --index 1 --regexp "^rlock: lock 'gone': Redis unavailable while waiting \(gave up at the --wait deadline\): connect to 127\.0\.0\.1:$port: Connection refused$"
	assert_equal "${#lines[@]}" 2
	rlock_wait "$holder" 60
}

# held_at PORT NAME / waiting_at PORT NAME: lock NAME is held / has a waiter on PORT.
held_at() { [[ $(redis-cli -p "$1" EXISTS "rlock:{$2}") == 1 ]]; }
waiting_at() { (($(waiters "$2" redis-cli -p "$1") >= 1)); }

# bgsave_failed PORT: the server on PORT failed its last BGSAVE (its dir is gone).
bgsave_failed() { redis-cli -p "$1" INFO persistence | grep -q '^rdb_last_bgsave_status:err'; }

@test "a server out of memory (OOM: maxmemory reached, noeviction) is waited out, not final: the job runs once memory is freed; -n still fails at once" {
	local port
	blip_serve
	port=$BLIP_PORT
	redis-cli -p "$port" CONFIG SET maxmemory 1 >/dev/null
	run -69 --separate-stderr rlock -n -u "redis://127.0.0.1:$port" -k oom -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'OOM'
	rlock_bg -w 60s -u "redis://127.0.0.1:$port" -k oom -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock: $(cat "$RLOCK_ERR")"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	[[ ! -e ran ]]
	redis-cli -p "$port" CONFIG SET maxmemory 0 >/dev/null
	ran_after_outage oom "127\.0\.0\.1:$port" "127\\.0\\.0\\.1:$port: acquire: server error: OOM .*"
}

@test "a server refusing writes after a failed BGSAVE (MISCONF) is waited out, not final: the job runs once it accepts writes" {
	local port
	mkdir rdb
	blip_serve --save '3600 1' --dir "$BATS_TEST_TMPDIR/rdb"
	port=$BLIP_PORT
	rm -rf rdb # its BGSAVE cannot write: writes are refused (stop-writes-on-bgsave-error)
	redis-cli -p "$port" BGSAVE >/dev/null
	wait_until 20 bgsave_failed "$port"
	[[ $(redis-cli -p "$port" SET probe 1 2>&1) == MISCONF* ]] || fail "no MISCONF"
	rlock_bg -w 60s -u "redis://127.0.0.1:$port" -k mc -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock: $(cat "$RLOCK_ERR")"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	[[ ! -e ran ]]
	redis-cli -p "$port" CONFIG SET stop-writes-on-bgsave-error no >/dev/null
	ran_after_outage mc "127\.0\.0\.1:$port" "127\\.0\\.0\\.1:$port: acquire: server error: MISCONF .*"
}

# occupy PORT [PASSWORD]: a client (redis-cli blocked in BLPOP, tracked) that holds a
# connection of the server on PORT; OCCUPANT is its pid.
occupy() {
	local auth=()
	[[ -z ${2:-} ]] || auth=(--no-auth-warning -a "$2")
	redis-cli -p "$1" "${auth[@]}" BLPOP occupant 0 </dev/null >/dev/null 2>&1 3>&- 4>&- &
	OCCUPANT=$!
	track_pid "$OCCUPANT"
	wait_until 20 occupied "$1" "${auth[@]}"
}

# occupied PORT [REDIS-CLI ARGS...]: a client of the server on PORT is blocked in BLPOP.
occupied() {
	local port=$1
	shift
	[[ $(redis-cli -p "$port" "$@" CLIENT LIST | grep -c "cmd=blpop") == 1 ]]
}

# full PORT [PASSWORD]: the server on PORT at its maxclients (1), held by the occupant.
full() {
	local auth=()
	[[ -z ${2:-} ]] || auth=(--no-auth-warning -a "$2")
	occupy "$@"
	redis-cli -p "$1" "${auth[@]}" CONFIG SET maxclients 1 >/dev/null
}

@test "a server at maxclients (ERR max number of clients reached) is waited out, not final, without a password and with one (not 'authentication failed'): the job runs once a connection is free; -n still fails at once" {
	local port
	blip_serve
	port=$BLIP_PORT
	full "$port"
	run -69 --separate-stderr rlock -n -u "redis://127.0.0.1:$port" -k mx -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'max number of clients reached'
	rlock_bg -w 60s -u "redis://127.0.0.1:$port" -k mx -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock: $(cat "$RLOCK_ERR")"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	[[ ! -e ran ]]
	kill "$OCCUPANT"
	ran_after_outage mx "127\.0\.0\.1:$port" \
		"127\.0\.0\.1:$port refused the connection: max number of clients reached \(its maxclients\)"
	# the refusal comes as the reply to AUTH: not a wrong password
	rm ran
	redis-cli -p "$port" CONFIG SET maxclients 10000 requirepass pw >/dev/null
	full "$port" pw
	printf pw >pw
	chmod 600 pw
	rlock_bg -w 60s -u "redis://127.0.0.1:$port" --password-file pw -k mx -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock: $(cat "$RLOCK_ERR")"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	kill "$OCCUPANT"
	ran_after_outage mx "127\.0\.0\.1:$port" \
		"127\.0\.0\.1:$port refused the connection: max number of clients reached \(its maxclients\)"
}

# make_dns_shim: dns.so, a getaddrinfo that answers for two test names the way a
# resolver does: rlock-dns.test fails with EAI_AGAIN (a resolver that cannot answer
# now) until the file $DNS_UP exists, then is 127.0.0.1; rlock-nxdomain.test does not
# exist (EAI_NONAME); rlock-silent.test gets no answer (a resolver that is not
# reachable: 30 s, then EAI_AGAIN). Every other name goes to the real resolver.
make_dns_shim() {
	cat >dns.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int getaddrinfo(const char *n, const char *s, const struct addrinfo *h, struct addrinfo **r)
{
	static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	if (!real)
		real = (int (*)(const char *, const char *, const struct addrinfo *,
		                struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
	int numeric = h && (h->ai_flags & AI_NUMERICHOST);
	if (n && !numeric && !strcmp(n, "rlock-nxdomain.test"))
		return EAI_NONAME;
	if (n && !numeric && !strcmp(n, "rlock-silent.test")) {
		sleep(30);
		return EAI_AGAIN;
	}
	if (n && !numeric && !strcmp(n, "rlock-dns.test")) {
		const char *up = getenv("DNS_UP");
		if (!up || access(up, F_OK) != 0)
			return EAI_AGAIN;
		n = "127.0.0.1";
	}
	return real(n, s, h, r);
}
C
	"${CC:-cc}" -shared -fPIC -o dns.so dns.c -ldl
}

@test "a resolver that cannot answer now (EAI_AGAIN) is waited out; a name that does not exist fails at once (69)" {
	make_dns_shim
	local asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	DNS_UP=$PWD/dns.up LD_PRELOAD=$PWD/dns.so ASAN_OPTIONS=$asan \
		rlock_bg -w 60s -u "redis://rlock-dns.test:$REDIS_PORT" -k dns -- touch ran
	wait_until 20 outage_said "$RLOCK_ERR" || fail "rlock: $(cat "$RLOCK_ERR")"
	proc_alive "$RLOCK_PID" || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	touch dns.up
	ran_after_outage dns "127\.0\.0\.1:$REDIS_PORT|rlock-dns\.test:$REDIS_PORT" \
		"resolve rlock-dns\.test: Temporary failure in name resolution"
	local t0 took
	t0=$(now_ms)
	DNS_UP=$PWD/dns.up LD_PRELOAD=$PWD/dns.so ASAN_OPTIONS=$asan run -69 --separate-stderr \
		"$RLOCK" -w 60s -u "redis://rlock-nxdomain.test:$REDIS_PORT" -k nx -- touch ran-nx
	took=$(($(now_ms) - t0))
	[[ ! -e ran-nx ]]
	assert_one_line_error
	assert_regex "$stderr" "resolve rlock-nxdomain\.test: "
	((took < 30000)) || fail "a name that does not exist waited $took ms"
}

# ---------------------------------------------------------------------------------
# item 5: the quick start takes only what it needs

@test "-w 1s with a resolver that does not answer: 69 at the deadline, not a --connect-timeout later" {
	make_dns_shim
	local asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" t0 took
	t0=$(now_ms)
	LD_PRELOAD=$PWD/dns.so ASAN_OPTIONS=$asan run -69 --separate-stderr \
		"$RLOCK" --connect-timeout 5s -w 1s -u "redis://rlock-silent.test:$REDIS_PORT" -k sl -- touch ran
	took=$(($(now_ms) - t0))
	echo "# silent resolver, -w 1s: 69 after $took ms" >&3
	[[ ! -e ran ]]
	((took >= 950)) || fail "gave up after $took ms, before the deadline: $stderr"
	# well under the 5 s --connect-timeout the lookup would have taken outside the wait
	((took < 4000)) || fail "gave up after $took ms: the lookup was not part of the 1 s wait: $stderr"
}

@test "scripts/demo on a machine without packages asks apt-get for the build and run dependencies only" {
	((EUID == 0)) || skip "needs root (as non-root, deps would go through sudo, whose PATH is not ours)"
	local stub=$BATS_TEST_TMPDIR/stub
	mkdir -p "$stub"
	# nothing is installed; apt-get records what it is asked and installs nothing
	printf '#!/bin/sh\nexit 1\n' >"$stub/dpkg-query"
	printf '#!/bin/sh\necho "$*" >>"%s/apt.log"\ncase "$*" in *install*) exit 1 ;; esac\n' \
		"$BATS_TEST_TMPDIR" >"$stub/apt-get"
	chmod +x "$stub/dpkg-query" "$stub/apt-get"
	run ! --separate-stderr env PATH="$stub:$PATH" "$RLOCK_SOURCE_DIR/scripts/demo"
	run -0 grep '^install ' "$BATS_TEST_TMPDIR/apt.log"
	local asked=" ${output##*--no-install-recommends} "
	echo "# scripts/demo asks for:$asked" >&3
	local p
	for p in build-essential cmake pkg-config libhiredis-dev libssl-dev redis-server; do
		[[ $asked == *" $p "* ]] || fail "demo does not install $p: $asked"
	done
	for p in bats bats-support bats-assert iptables rpm zsh fish debhelper dpkg-dev valgrind \
		shellcheck clang clang-format mandoc tmux jq python3-yaml sqlite3 systemd; do
		[[ $asked != *" $p "* ]] || fail "demo installs the test package $p: $asked"
	done
}

@test "scripts/demo: the two jobs run one after the other, its stamped lines in time order" {
	((EUID == 0)) || skip "needs root (scripts/deps --run would go through sudo)"
	# the binary under test, not a build of its own (RLOCK_DEMO_RLOCK)
	run -0 --separate-stderr timeout 60 env RLOCK_DEMO_RLOCK="$RLOCK" "$RLOCK_SOURCE_DIR/scripts/demo"
	local stamped
	stamped=$(printf '%s\n' "$output" | grep -E '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}  ')
	echo "$stamped" >&3
	# one stamper: the times never run backwards (two raced each other before)
	printf '%s\n' "$stamped" | cut -c1-12 | sort -c ||
		fail "stamped lines out of time order"
	local a_end b_start
	a_end=$(printf '%s\n' "$stamped" | grep -n 'job A end$' | cut -d: -f1)
	b_start=$(printf '%s\n' "$stamped" | grep -n 'job B start$' | cut -d: -f1)
	[[ -n $a_end && -n $b_start ]] || fail "a job's lines are missing"
	((a_end < b_start)) || fail "job B started before job A ended"
	assert_line --partial "is busy (held by"
}
