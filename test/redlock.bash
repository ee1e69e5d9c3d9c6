# shellcheck shell=bash
# Redlock test files (redlock.bats, redlock_ops.bats): five real redis-servers on
# loopback, independent masters; "down" is a killed server (restarted on its port,
# empty, as after a restart without persistence), "paused" a SIGSTOPped one. The
# nodes, their helpers, and each file's setup and teardown.
# shellcheck disable=SC2034 # N is read by the files that load this one

N=5

# node_start I: start node I and record its pid, once the server answering on its port
# is the one started. Its first start picks a free port (another one when that was
# taken meanwhile); a restart keeps the port the URLs name.
node_start() {
	local i=$1 port dir pid st attempt
	dir=$BATS_FILE_TMPDIR/node$i
	mkdir -p "$dir"
	for ((attempt = 0; attempt < 5; attempt++)); do
		port=$(cat "$BATS_FILE_TMPDIR/node$i.port" 2>/dev/null) || port=$(free_port)
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
			--daemonize no --dir "$dir" </dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
		pid=$!
		remember_server "$pid"
		st=0
		_await_server node_start "$pid" "$dir" _redis_is "$pid" -p "$port" || st=$?
		if ((st == 0)); then
			echo "$port" >"$BATS_FILE_TMPDIR/node$i.port"
			echo "$pid" >"$BATS_FILE_TMPDIR/node$i.pid"
			return 0
		fi
		[[ $st == 2 && ! -e $BATS_FILE_TMPDIR/node$i.port ]] || break
	done
	echo "node_start $i: no server of ours answers on port $port" >&2
	return 1
}

node_port() { cat "$BATS_FILE_TMPDIR/node$1.port"; }
node_pid() { cat "$BATS_FILE_TMPDIR/node$1.pid"; }
node_cli() {
	local i=$1
	shift
	redis-cli -p "$(node_port "$i")" "$@"
}
node_pause() { kill -STOP "$(node_pid "$1")"; }
node_resume() { kill -CONT "$(node_pid "$1")" 2>/dev/null || true; }
node_kill() { redis_stop "$(node_pid "$1")"; }
node_up() { _redis_is "$(node_pid "$1")" -p "$(node_port "$1")"; }
node_has() { [[ $(node_cli "$1" GET "$2") == "$3" ]]; } # node_has I KEY VALUE
node_has_field() { [[ $(node_cli "$1" HGET 'rlock:{p}:preempt' "$2") == "$3" ]]; } # node_has_field I FIELD VALUE: of p's --preempt record
ms_past() { (($(now_ms) - $1 >= $2)); }                  # ms_past T0 MS
counted_past() { (($(node_cli "$1" GET "$2") >= $3)); }  # counted_past I KEY N
newest_has() { node_cli "$1" XREVRANGE "rlock:{$2}:history" + - COUNT 1 | grep -q "$3"; } # newest_has I NAME TEXT
split_count() { (($(grep -c 'split vote' "$1") >= $2)); } # split_count FILE N

# The five URLs, comma-separated.
urls() {
	local i list=
	for ((i = 0; i < N; i++)); do
		list+=${list:+,}redis://127.0.0.1:$(node_port "$i")
	done
	echo "$list"
}

# keys_left NAME: how many nodes hold the lock key of NAME.
keys_left() {
	local i n=0
	for ((i = 0; i < N; i++)); do
		[[ $(node_cli "$i" EXISTS "rlock:{$1}") == 1 ]] && n=$((n + 1))
	done
	echo "$n"
}

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	local i
	for ((i = 0; i < N; i++)); do
		node_start "$i"
	done
}

teardown_file() { redis_stop_all; }

setup() {
	local i
	for ((i = 0; i < N; i++)); do
		node_resume "$i"
		node_up "$i" || node_start "$i"
		node_cli "$i" FLUSHALL >/dev/null
	done
	export RLOCK_URL
	RLOCK_URL=$(urls)
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
}

teardown() {
	local i
	kill_tracked
	for ((i = 0; i < N; i++)); do
		node_resume "$i"
		node_cli "$i" ACL SETUSER default +@all >/dev/null 2>&1 || true
		node_cli "$i" REPLICAOF NO ONE >/dev/null 2>&1 || true
		node_cli "$i" ACL DELUSER rl >/dev/null 2>&1 || true
		node_cli "$i" CONFIG SET timeout 0 >/dev/null 2>&1 || true
		node_cli "$i" -a s3cret --no-auth-warning CONFIG SET requirepass '' >/dev/null 2>&1 || true
	done
}
