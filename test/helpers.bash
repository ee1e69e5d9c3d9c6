# Shared helpers for rlock's command-line tests. Every test/*.bats does `load helpers`.
#
# - one real redis-server per .bats file (setup_file → redis_start, teardown_file →
#   redis_stop_all), on a free loopback port or a Unix socket, FLUSHALL before each test;
# - bounded polling (wait_until), never a fixed sleep-and-hope;
# - processes are only ever killed by PID (never pkill/killall);
# - proc_alive treats zombies as dead (PID 1 reaps slowly on CI machines).
# shellcheck shell=bash disable=SC2034  # RLOCK_STATUS, REDIS_* etc. are for the caller

bats_require_minimum_version 1.5.0
load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load
load "${BASH_SOURCE[0]%/*}/skip" # ci_skip, require_tool (beside this file: test/conformance/ loads it too)

# Every test is bounded; a file may lower or raise this before its first test.
: "${BATS_TEST_TIMEOUT:=180}"
export BATS_TEST_TIMEOUT

RLOCK_SOURCE_DIR=${RLOCK_SOURCE_DIR:-$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)}
RLOCK_BUILD_DIR=${RLOCK_BUILD_DIR:-$RLOCK_SOURCE_DIR/build}
RLOCK=${RLOCK:-$RLOCK_BUILD_DIR/rlock}
export RLOCK RLOCK_SOURCE_DIR RLOCK_BUILD_DIR

# Isolate rlock from the caller's environment and config files: the tests say which
# server to use (REDIS_URL, exported by redis_start) and nothing else leaks in.
unset RLOCK_URL RLOCK_PREFIX RLOCK_CONFIG RLOCK_PASSWORD REDISCLI_AUTH \
	RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE RLOCK_TTL_MS RLOCK_KEYS RLOCK_TOKENS RLOCK_FENCES
export XDG_CONFIG_HOME="${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}}/xdg-config"
export LC_ALL=C

# RLOCK_TEST_SERVER_BIN=DIR: the servers every helper starts (redis-server,
# redis-sentinel, redis-cli) come from DIR, first on PATH: scripts/servers prints such a
# directory for Redis 7.2 and Valkey (scripts/test's compatibility passes). Unset: the
# host's redis-server.
if [[ -n ${RLOCK_TEST_SERVER_BIN:-} ]]; then
	if [[ ! -x $RLOCK_TEST_SERVER_BIN/redis-server || ! -x $RLOCK_TEST_SERVER_BIN/redis-cli ]]; then
		echo "RLOCK_TEST_SERVER_BIN=$RLOCK_TEST_SERVER_BIN has no redis-server and redis-cli" >&2
		exit 1
	fi
	[[ :$PATH: == *":$RLOCK_TEST_SERVER_BIN:"* ]] || PATH=$RLOCK_TEST_SERVER_BIN:$PATH
	export PATH
fi

# ---------------------------------------------------------------------------------
# time and polling

# now_ms: wall-clock milliseconds since the epoch (no fork).
now_ms() {
	local t=${EPOCHREALTIME/,/.}
	local frac=${t#*.}
	echo $((${t%.*} * 1000 + 10#${frac:0:3}))
}

# _to_ms SECONDS (fractions allowed) → milliseconds
_to_ms() {
	local s=$1 int frac
	int=${s%%.*}
	[[ $s == *.* ]] && frac=${s#*.} || frac=0
	frac=${frac}000
	echo $((10#${int:-0} * 1000 + 10#${frac:0:3}))
}

# wait_until TIMEOUT_S CMD [ARG...]: poll CMD every 20 ms until it succeeds; fail
# (return 1, with a message on stderr) if it has not succeeded within TIMEOUT_S.
wait_until() {
	local timeout=$1 deadline
	shift
	deadline=$(($(now_ms) + $(_to_ms "$timeout")))
	while ! "$@"; do
		if (($(now_ms) >= deadline)); then
			echo "wait_until: '$*' not true after ${timeout}s" >&2
			return 1
		fi
		sleep 0.02
	done
}

# not CMD...: negate, for use with wait_until. A CMD that fails on missing data (an
# empty pid, a redis-cli that could not connect) becomes a verdict under `not`: prefer
# the check that fails without an answer (proc_gone, pidfile_gone, key_exists).
not() { ! "$@"; }

# proc_alive PID: the process exists and is not a zombie (or dead, state X).
proc_alive() {
	local stat state
	[[ -n ${1:-} ]] || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $stat ]] || return 1
	state=${stat##*) }
	state=${state%% *}
	[[ $state != Z && $state != X ]]
}

# proc_gone PID: the process has ended (or is a zombie). An empty PID, or one that is
# not a number, is no answer and fails: a wait or an assertion on a pid not known yet
# must wait or fail, never read "ended" into missing data (`not proc_alive ""` did).
proc_gone() { [[ ${1:-} =~ ^[0-9]+$ ]] && ! proc_alive "$1"; }

# pid_of FILE: the pid FILE holds once it is written whole (one number), else fails.
pid_of() {
	local p
	p=$(cat "$1" 2>/dev/null) || return 1
	[[ $p =~ ^[0-9]+$ ]] || return 1
	printf '%s\n' "$p"
}

# pidfile_alive FILE, pidfile_gone FILE: the process whose pid FILE holds is running,
# has ended. FILE is read at each call, so that wait_until polls it as it is written (a
# "$(cat FILE)" argument is read once, when wait_until is called); while FILE holds no
# pid, both fail.
pidfile_alive() {
	local p
	p=$(pid_of "$1") && proc_alive "$p"
}
pidfile_gone() {
	local p
	p=$(pid_of "$1") && proc_gone "$p"
}

# file_has_lines FILE N: FILE exists and has at least N lines.
file_has_lines() {
	[[ -f $1 ]] && (($(wc -l <"$1") >= $2))
}

# ---------------------------------------------------------------------------------
# redis-server per test file

_redis_port_counter=0

# _port_free PORT: nothing can be listening on 127.0.0.1:PORT (we can bind it).
_port_free() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ARGV[0],
			Proto => "tcp", Listen => 1, ReuseAddr => 1) or exit 1;
		close $s; exit 0' "$1"
}

# free_port: print a free loopback port in [20000, 32767], claimed for this bats run
# (test/claim-port): no other test process of this user (another bats file, the fault
# suite, the explorer) is handed it until the run ends, so a test that stops its server
# and starts it again on the same port finds the port still free. Below the kernel's
# ephemeral range (32768 up): no outgoing connection's source port can take it either;
# another user's program still may (redis_start then moves on).
free_port() {
	"$RLOCK_SOURCE_DIR/test/claim-port" "${BATS_ROOT_PID:-$$}"
}

_redis_ready() {
	redis-cli "$@" ping 2>/dev/null | grep -q PONG
}

# _redis_is PID ARGS...: the server redis-cli ARGS reaches answers, and it is PID (not
# another program's server that holds the port PID could not bind).
_redis_is() {
	local pid=$1
	shift
	redis-cli "$@" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid"
}

# _await_server WHO PID DIR PROBE [ARGS...]: poll PROBE ARGS (bounded: 200 x 50 ms)
# until the redis-server PID in DIR answers. Returns 0 when ready; 2 when the server
# died (e.g. its port was taken meanwhile: the caller retries on another); 1, after
# reporting its log and killing it, when it lives but never answers.
_await_server() {
	local who=$1 pid=$2 dir=$3 i
	shift 3
	for ((i = 0; i < 200; i++)); do
		"$@" && return 0
		proc_alive "$pid" || break
		sleep 0.05
	done
	if proc_alive "$pid"; then
		echo "$who: redis-server (pid $pid) never answered PING" >&2
		cat "$dir/redis.log" >&2
		kill -KILL "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid" 2>/dev/null || true
	_forget_pid "$pid"
	return 2
}

# remember_server PID: note a server this file started (in redis.pids, as "PID START",
# START its starttime: redis_stop_all stops it at the file's end, and never a process
# that got its PID after it was gone: a PID is reused quickly on a busy machine).
remember_server() {
	echo "$1 $(_proc_field "$1" 22 2>/dev/null || echo -)" >>"${BATS_FILE_TMPDIR:-/tmp}/redis.pids"
}

# _forget_pid PID: PID has been reaped: out of redis.pids, so that redis_stop_all never
# signals a pid the kernel may have given to another process since.
_forget_pid() {
	local f=${BATS_FILE_TMPDIR:-/tmp}/redis.pids
	[[ -f $f ]] || return 0
	awk -v p="$1" '$1 != p' "$f" >"$f.tmp" || true
	mv -f "$f.tmp" "$f"
}

# _remembered_start PID: the starttime redis.pids holds for PID (- for one that was
# gone when noted), or nothing when PID is not there.
_remembered_start() {
	awk -v p="$1" '$1 == p { s = $2 } END { if (s != "") print s }' \
		"${BATS_FILE_TMPDIR:-/tmp}/redis.pids" 2>/dev/null
}

# redis_start [--unix] [EXTRA REDIS-SERVER ARGS...]
# Start a redis-server in the background, wait (bounded) until it answers PING, and
# export REDIS_PID, REDIS_PORT (0 for --unix), REDIS_SOCKET (empty for TCP),
# REDIS_URL and REDIS_DIR. Every started PID is also remembered for redis_stop_all.
redis_start() {
	local unix=0 attempt dir port sock pid cli_args=() listen_args=()
	if [[ ${1:-} == --unix ]]; then
		unix=1
		shift
	fi
	for ((attempt = 0; attempt < 5; attempt++)); do
		dir=$(mktemp -d "${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}}/redis.XXXXXX")
		if ((unix)); then
			sock=$dir/redis.sock
			# sun_path is 108 bytes; fall back to a short directory under /tmp.
			if ((${#sock} > 100)); then
				dir=$(mktemp -d /tmp/rlt.XXXXXX)
				sock=$dir/redis.sock
			fi
			port=0
			listen_args=(--port 0 --unixsocket "$sock" --unixsocketperm 700)
			cli_args=(-s "$sock")
		else
			port=$(free_port) || return 1
			sock=
			listen_args=(--port "$port" --bind 127.0.0.1)
			cli_args=(-p "$port")
		fi
		redis-server "${listen_args[@]}" --save '' --appendonly no --daemonize no \
			--dir "$dir" "$@" </dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
		pid=$!
		remember_server "$pid"
		local st=0
		_await_server redis_start "$pid" "$dir" _redis_is "$pid" "${cli_args[@]}" || st=$? # set -e
		case $st in
		0)
			export REDIS_PID=$pid REDIS_PORT=$port REDIS_SOCKET=$sock REDIS_DIR=$dir
			if ((unix)); then
				export REDIS_URL="unix://$sock"
			else
				export REDIS_URL="redis://127.0.0.1:$port"
			fi
			return 0
			;;
		1) return 1 ;;
		esac
	done
	echo "redis_start: redis-server failed to start 5 times; last log:" >&2
	cat "$dir/redis.log" >&2
	return 1
}

# rcli ARGS...: redis-cli against the current test server.
rcli() {
	if [[ -n ${REDIS_SOCKET:-} ]]; then
		redis-cli -s "$REDIS_SOCKET" "$@"
	else
		redis-cli -p "$REDIS_PORT" "$@"
	fi
}

# waiters NAME [CLI...]: how many rlocks wait for lock NAME's release (CLI: rcli):
# subscribed to its channel PREFIX{NAME}:released, or with a place among its plain
# waiters (a release pushes to that place's own list, which keeps the wake-up until
# the waiter reads it: a placed waiter cannot miss it). A subscriber counts as soon
# as it has subscribed, before the attempt that follows (a release in between hands
# it the lock without a wake-up): where a test asserts the wake-up of a waiter on the
# channel, it waits for that waiter's -vv line "listening for the release" instead.
waiters() {
	local name=$1 cli=(rcli) sub placed
	shift
	(($#)) && cli=("$@")
	sub=$("${cli[@]}" PUBSUB NUMSUB "rlock:{$name}:released" | sed -n 2p)
	placed=$("${cli[@]}" ZCARD "rlock:{$name}:waiters")
	echo $((sub + placed))
}

# redis_stop [PID]: SIGTERM the server (default $REDIS_PID), wait for it, SIGKILL if
# it lingers. Resumes it first in case a test left it stopped. A server of redis.pids
# that is gone already (its PID perhaps another process's now) is only forgotten.
redis_stop() {
	local pid=${1:-${REDIS_PID:-}} start
	[[ -n $pid ]] || return 0
	start=$(_remembered_start "$pid")
	if [[ -z $start ]] || _same_proc "$pid" "$start"; then
		kill -CONT "$pid" 2>/dev/null || true
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_until 10 proc_gone "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
			wait_until 5 proc_gone "$pid" || true
		fi
		wait "$pid" 2>/dev/null || true
	fi
	[[ -z $start ]] || _forget_pid "$pid"
}

redis_stop_all() {
	local f=${BATS_FILE_TMPDIR:-/tmp}/redis.pids pid _start
	[[ -f $f ]] || return 0
	while read -r pid _start; do
		redis_stop "$pid"
	done < <(cat "$f")
	rm -f "$f"
}

# dead_port: a loopback port with nothing listening (for "Redis unavailable" tests).
dead_port() { free_port; }

# silent_port: print a loopback port that accepts connections and never answers a
# byte: a stopped server, a sentinel or a proxy that hangs. Each connection it accepted
# is a line of $BATS_TEST_TMPDIR/silent.PORT.conns (silent_conns PORT counts them). The
# listener is tracked (kill_tracked stops it) and exits by itself after 120 s.
silent_port() {
	local f
	f=$(mktemp "$BATS_TEST_TMPDIR/silent.XXXXXX") || return 1
	(exec 3>&- 4>&- perl -MIO::Socket::INET -MIO::Handle -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Listen => 50, ReuseAddr => 1) or die "listen: $!";
		my $port = $s->sockport;
		open my $log, ">>", "$ARGV[1]/silent.$port.conns" or die; $log->autoflush(1);
		open my $f, ">", "$ARGV[0].tmp" or die; print $f "$port\n"; close $f;
		rename "$ARGV[0].tmp", $ARGV[0];
		$SIG{ALRM} = sub { exit 0 }; alarm 120;
		my @held;
		while (my $c = $s->accept) { push @held, $c; print $log "conn\n"; }' \
		"$f" "$BATS_TEST_TMPDIR") </dev/null >/dev/null 2>&1 &
	track_pid $!
	wait_until 30 test -s "$f" || return 1
	cat "$f"
}

# silent_conns PORT: how many connections the silent_port listener on PORT accepted.
silent_conns() {
	local f=$BATS_TEST_TMPDIR/silent.$1.conns
	if [[ -e $f ]]; then wc -l <"$f"; else echo 0; fi
}

# ---------------------------------------------------------------------------------
# running rlock

# rlock ARGS...: the binary under test (for `run rlock ...`).
rlock() { "$RLOCK" "$@"; }

# Launcher for background runs: closes every inherited fd ≥ 3 except $RL_KEEP_FDS
# (bats keeps fds 3 and 4 open in tests), resets every signal to its default and
# unblocks all (bash makes INT and QUIT ignored in background jobs), optionally puts
# the process into its own process group ($RL_NEWPGRP), then execs.
# shellcheck disable=SC2016
_RL_LAUNCHER='
use POSIX ();
my %keep = map { $_ => 1 } split /,/, ($ENV{RL_KEEP_FDS} // "");
for my $fd (3 .. 1023) { POSIX::close($fd) unless $keep{$fd}; }
for my $sig (1 .. 31) {
	next if $sig == 9 || $sig == 19;
	POSIX::sigaction($sig, POSIX::SigAction->new("DEFAULT"));
}
POSIX::sigprocmask(POSIX::SIG_SETMASK(), POSIX::SigSet->new());
setpgrp(0, 0) if $ENV{RL_NEWPGRP};
delete @ENV{qw(RL_KEEP_FDS RL_NEWPGRP)};
exec { $ARGV[0] } @ARGV or do { print STDERR "exec $ARGV[0]: $!\n"; exit 127 };
'

_bg_counter=0

# clean_exec [--pgrp] [--keep-fds N,M] CMD ARGS...: exec CMD via the launcher
# (in the foreground; use in a subshell or with &).
clean_exec() {
	local keep='' pgrp=''
	while :; do
		case ${1:-} in
		--pgrp) pgrp=1 && shift ;;
		--keep-fds) keep=$2 && shift 2 ;;
		*) break ;;
		esac
	done
	RL_KEEP_FDS=$keep RL_NEWPGRP=$pgrp exec perl -e "$_RL_LAUNCHER" "$@"
}

# rlock_bg [--pgrp] [--keep-fds N,M] [--stdin FILE] RLOCK-ARGS...
# Start rlock in the background with a clean fd table and default signal handling.
# Sets RLOCK_PID, RLOCK_OUT, RLOCK_ERR (stdout/stderr files). Stdin is /dev/null
# unless --stdin is given. The PID is remembered and killed in teardown if still alive.
rlock_bg() {
	local launch=() stdin=/dev/null
	while :; do
		case ${1:-} in
		--pgrp) launch+=(--pgrp) && shift ;;
		--keep-fds) launch+=(--keep-fds "$2") && shift 2 ;;
		--stdin) stdin=$2 && shift 2 ;;
		*) break ;;
		esac
	done
	_bg_counter=$((_bg_counter + 1))
	RLOCK_OUT=$BATS_TEST_TMPDIR/rlock.$_bg_counter.out
	RLOCK_ERR=$BATS_TEST_TMPDIR/rlock.$_bg_counter.err
	(clean_exec "${launch[@]}" "$RLOCK" "$@") <"$stdin" >"$RLOCK_OUT" 2>"$RLOCK_ERR" &
	RLOCK_PID=$!
	track_pid "$RLOCK_PID"
}

# rlock_wait [PID] [TIMEOUT_S]: wait (bounded, default 20 s) for a background rlock
# to exit; sets RLOCK_STATUS. Fails the test if it is still running.
rlock_wait() {
	local pid=${1:-$RLOCK_PID} timeout=${2:-20}
	[[ -n $pid ]] || {
		echo "rlock_wait: no pid to wait for" >&2
		return 1
	}
	if ! wait_until "$timeout" proc_gone "$pid"; then
		echo "rlock_wait: pid $pid still running after ${timeout}s" >&2
		return 1
	fi
	RLOCK_STATUS=0
	wait "$pid" || RLOCK_STATUS=$?
}

# track_pid PID...: remember processes to kill in teardown (by PID, never by name).
track_pid() {
	local p
	for p in "$@"; do
		# "PID START": kill_tracked never signals a PID given to another process since
		echo "$p $(_proc_field "$p" 22 2>/dev/null || echo -)" >>"$BATS_TEST_TMPDIR/tracked.pids"
	done
}

# track_pidfile FILE: remember the PID written into FILE (by a test's command).
track_pidfile() {
	[[ -s $1 ]] && track_pid "$(cat "$1")"
}

# _proc_field PID N: field N (as numbered in proc(5), N >= 3) of /proc/PID/stat.
_proc_field() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $stat ]] || return 1
	stat=${stat##*) }
	read -r -a stat <<<"$stat"
	echo "${stat[$2 - 3]}"
}

# _same_proc PID START: PID is alive and still the process that began at START (its
# starttime, field 22: a PID can be reused once its process is gone).
_same_proc() {
	proc_alive "$1" && [[ $(_proc_field "$1" 22) == "$2" ]]
}

# _my_ancestor PID: PID is this shell or one of its ancestors (bats itself).
_my_ancestor() {
	local p=$BASHPID i
	for ((i = 0; i < 16 && p > 1; i++)); do
		[[ $p == "$1" ]] && return 0
		p=$(_proc_field "$p" 4) || return 1
	done
	return 1
}

# _settling: print "PID START" for every live process that was told to let go: once
# TAG.release exists, the one that ran `hold TAG` (its rlock, or a shell inside one)
# and every tracked ancestor of it (rlock_bg's rlocks: one that ran the rlock that ran
# hold, say), as hold recorded them at its start (TAG.rlock).
_settling() {
	local rel tag pid start n tracked=$BATS_TEST_TMPDIR/tracked.pids
	for rel in "$BATS_TEST_TMPDIR"/*.release; do
		[[ -e $rel ]] || continue
		tag=${rel%.release}
		[[ -s $tag.rlock ]] || continue
		n=0
		while read -r pid start; do
			n=$((n + 1))
			_same_proc "$pid" "$start" || continue
			if ((n == 1)); then
				_my_ancestor "$pid" && continue # hold run by the test itself
			else
				grep -qs "^$pid " "$tracked" || continue
			fi
			echo "$pid $start"
		done <"$tag.rlock"
	done
}

# _all_gone FILE: no "PID START" line of FILE is a live process any more.
_all_gone() {
	local pid start
	while read -r pid start; do
		_same_proc "$pid" "$start" && return 1
	done <"$1"
	return 0
}

# settle_tracked: let the rlocks that were told to let go (see _settling) finish their
# release on their own (bounded: 20 s) before teardown kills them: a holder SIGKILLed
# between `touch TAG.release` and its release leaves its lock for a whole lease (a
# fast machine ends the test sooner, a slow one releases later). A test that ends so
# should still wait for its holder (rlock_wait): this is the net under it.
settle_tracked() {
	local f=$BATS_TEST_TMPDIR/settling
	_settling >"$f"
	[[ -s $f ]] || return 0
	if ! wait_until 20 _all_gone "$f" 2>/dev/null; then
		echo "settle_tracked: released rlock(s) still running after 20s:" \
			"$(cut -d' ' -f1 "$f" | tr '\n' ' ')(killed)" >&2
	fi
}

# kill_tracked: SIGKILL every tracked process (and its group, if it leads one), once
# the rlocks told to let go have finished (settle_tracked).
kill_tracked() {
	local f=$BATS_TEST_TMPDIR/tracked.pids pid start
	settle_tracked
	[[ -f $f ]] || return 0
	while read -r pid start; do
		[[ $pid =~ ^[0-9]+$ ]] || continue
		if _same_proc "$pid" "$start"; then
			if [[ $(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') == "$pid" ]]; then
				kill -KILL -- "-$pid" 2>/dev/null || true
			fi
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done <"$f"
	rm -f "$f"
}

# children_of PID: direct child PIDs of PID.
children_of() {
	ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' '
}

# renewed N KEY CLI...: for wait_until: true once the PTTL of KEY (read with `CLI...
# PTTL KEY`) has gone up N times since renewed_reset, i.e. N renewals were seen. A
# condition to poll for, instead of sleeping through a window and hoping that a
# lease short enough to need renewals got them in time on a slow machine.
renewed_reset() { _renew_last=-1 _renew_ups=0; }
renewed() {
	local n=$1 key=$2 p
	shift 2
	p=$("$@" PTTL "$key") || return 1
	if ((_renew_last >= 0 && p > _renew_last)); then
		_renew_ups=$((_renew_ups + 1))
	fi
	_renew_last=$p
	((_renew_ups >= n))
}

# key_exists KEY / key_absent KEY
key_exists() { [[ $(rcli EXISTS "$1") == 1 ]]; }
key_absent() { [[ $(rcli EXISTS "$1") == 0 ]]; }
# zset_lacks KEY MEMBER: the sorted set KEY has no MEMBER (a read that fails is no answer).
zset_lacks() {
	local s
	s=$(rcli ZSCORE "$1" "$2") || return 1
	[[ -z $s ]]
}
# history_expiring KEY [RETENTION_MS]: KEY, a name's run history (PREFIX{NAME}:history, on
# by default), is absent or expires within the retention (default 7 days): the one key
# besides the fence counter that an idle name keeps, and not for ever.
history_expiring() {
	local p
	p=$(rcli PTTL "$1")
	[[ $p == -2 ]] || ((p > 0 && p <= ${2:-604800000})) || {
		echo "$1: PTTL $p, not within the retention" >&2
		return 1
	}
}

# ---------------------------------------------------------------------------------
# default per-file / per-test fixtures (a file may override and call these)

rlock_require_binary() {
	if [[ ! -x $RLOCK ]]; then
		echo "rlock binary not found at '$RLOCK' (build first: cmake -B build && cmake --build build)" >&2
		return 1
	fi
}

common_setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME/rlock"
	# An installed and configured rlock's /etc/rlock.conf comes before REDIS_URL and
	# would send the tests to its server; the config layers merge (a user file no longer
	# hides it): no config at all then, unless a test names one.
	[[ ! -e /etc/rlock.conf ]] || export RLOCK_CONFIG=/dev/null
	redis_start "$@"
}

common_teardown_file() {
	redis_stop_all
}

common_setup() {
	# Resume the server in case an earlier test stopped it and failed before resuming.
	kill -CONT "$REDIS_PID" 2>/dev/null || true
	rcli FLUSHALL >/dev/null
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
}

# make_hold_script: write $BATS_TEST_TMPDIR/hold, a command to run under rlock:
#   hold TAG [STATUS]
# records RLOCK_* (TAG.env), its pid (TAG.pid), its parent's pid and starttime
# (TAG.rlock, for settle_tracked) and start time in ms (TAG.start),
# creates TAG.started, waits (at most 30 s) until TAG.release exists, records the end
# time (TAG.end) and exits STATUS (default 0). Files live in $BATS_TEST_TMPDIR.
make_hold_script() {
	HOLD=$BATS_TEST_TMPDIR/hold
	cat >"$HOLD" <<EOF
#!/bin/sh
cd '$BATS_TEST_TMPDIR' || exit 99
tag=\${1:-h} status=\${2:-0}
env | grep '^RLOCK_' | sort >"\$tag.env"
echo \$\$ >"\$tag.pid"
# its ancestors, "PID STARTTIME" (the one that runs it first), for settle_tracked
p=\$PPID n=0
: >"\$tag.rlock"
while [ \$n -lt 4 ] && [ "\$p" -gt 1 ] && { read -r s <"/proc/\$p/stat"; } 2>/dev/null; do
	set -- \${s##*) }
	echo "\$p \${20}" >>"\$tag.rlock"
	p=\$2 n=\$((n + 1))
done
date +%s%3N >"\$tag.start"
touch "\$tag.started"
i=0
while [ ! -e "\$tag.release" ] && [ \$i -lt 1500 ]; do sleep 0.02; i=\$((i + 1)); done
date +%s%3N >"\$tag.end"
exit \$status
EOF
	chmod +x "$HOLD"
}

# start_holder TAG [RLOCK-ARGS...]: rlock ARGS -k TAG -- hold TAG in the background;
# waits until the command runs. Sets HOLDER_PID (rlock's pid), HOLDER_ERR.
start_holder() {
	local tag=$1
	shift
	rlock_bg "$@" -k "$tag" -- "$HOLD" "$tag"
	HOLDER_PID=$RLOCK_PID HOLDER_ERR=$RLOCK_ERR
	wait_until 30 test -e "$BATS_TEST_TMPDIR/$tag.started"
	track_pidfile "$BATS_TEST_TMPDIR/$tag.pid"
}

# env_of TAG VAR: the value of VAR recorded by `hold TAG`.
env_of() {
	sed -n "s/^$2=//p" "$BATS_TEST_TMPDIR/$1.env"
}

common_teardown() {
	kill_tracked
}

setup_file() { common_setup_file "$@"; }
teardown_file() { common_teardown_file; }
setup() { common_setup; }
teardown() { common_teardown; }

# ---------------------------------------------------------------------------------
# delay_proxy_start DELAY_MS [UPSTREAM_PORT]: a loopback TCP proxy to the test server
# (default $REDIS_PORT) that forwards requests at once but holds every reply back for
# DELAY_MS: the server has acted, the client hears of it late (a paused or slow
# network path). Exports PROXY_PORT, PROXY_PID, PROXY_URL. Stop it with kill_tracked
# (it is tracked) or kill "$PROXY_PID".
# shellcheck disable=SC2016
_DELAY_PROXY='
use strict; use warnings;
use IO::Socket::INET; use IO::Select; use Time::HiRes qw(time);
my ($lport, $uport, $delay, $ready) = @ARGV;
$delay /= 1000;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $lport,
	Listen => 64, ReuseAddr => 1) or die "listen: $!";
my $sel = IO::Select->new($l);
my (%peer, %up, %q, %fh);
sub drop { my $c = shift; for my $x ($c, $peer{$c}) { next unless $x; $sel->remove($x); close $x;
	delete $q{$x}; delete $up{$x}; delete $fh{$x}; } delete $peer{$peer{$c}} if $peer{$c}; delete $peer{$c}; }
open my $r, ">", $ready or die; print $r "$$\n"; close $r;
for (;;) {
	my $now = time; my $wait = 0.05;
	for my $k (keys %q) { next unless @{$q{$k}}; my $d = $q{$k}[0][0] - $now;
		$wait = $d if $d < $wait; }
	$wait = 0 if $wait < 0;
	for my $h ($sel->can_read($wait)) {
		if ($h == $l) {
			my $c = $l->accept or next;
			my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $uport)
				or do { close $c; next };
			$peer{$c} = $u; $peer{$u} = $c; $up{$u} = 1; $fh{$c} = $c; $fh{$u} = $u;
			$q{$c} = []; $sel->add($c, $u); next;
		}
		next unless $fh{$h};
		my $n = sysread($h, my $buf, 65536);
		my $o = $peer{$h};
		if ($up{$h}) { push @{$q{$o}}, [time + $delay, $n ? $buf : undef]; next; }
		if (!$n) { drop($h); next; }
		syswrite($o, $buf);
	}
	$now = time;
	for my $k (keys %q) {
		my $c = $fh{$k} or next;
		while ($q{$k} && @{$q{$k}} && $q{$k}[0][0] <= $now) {
			my $item = shift @{$q{$k}};
			if (!defined $item->[1]) { drop($c); last; }
			syswrite($c, $item->[1]);
		}
	}
}
'

delay_proxy_start() {
	local delay=$1 upstream=${2:-$REDIS_PORT} port ready
	port=$(free_port) || return 1
	ready=$BATS_TEST_TMPDIR/proxy.$port.ready
	perl -e "$_DELAY_PROXY" "$port" "$upstream" "$delay" "$ready" </dev/null \
		>"$BATS_TEST_TMPDIR/proxy.$port.log" 2>&1 3>&- 4>&- &
	PROXY_PID=$!
	disown "$PROXY_PID" # no "Killed" job message when teardown stops it
	track_pid "$PROXY_PID"
	if ! wait_until 10 test -s "$ready"; then
		cat "$BATS_TEST_TMPDIR/proxy.$port.log" >&2
		return 1
	fi
	export PROXY_PORT=$port PROXY_PID PROXY_URL="redis://127.0.0.1:$port"
}

# =================================================================================
# TLS and credential fixtures (used by tls.bats and credentials.bats; appended
# section, owned by the TLS/credentials tests).

# tls_make_certs DIR: generate test certificates with openssl into DIR (EC P-256,
# fast). Exports TLS_CERTS=DIR. Files:
#   ca.pem/ca.key          the test CA
#   server.pem/server.key  server cert signed by ca, SAN IP:127.0.0.1, DNS:localhost
#   expired.pem            same key and SAN, signed by ca, valid only in January 2020
#   client.pem/client.key  client cert (clientAuth) signed by ca
#   other-ca.pem/.key      an unrelated CA
#   cadir/                 ca.pem in a hashed directory (for --cacertdir)
tls_make_certs() {
	local d=$1
	mkdir -p "$d/newcerts" "$d/cadir" || return 1
	: >"$d/index.txt"
	echo 1000 >"$d/serial"
	cat >"$d/openssl.cnf" <<CNF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = placeholder
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[srv]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyAgreement
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[cli]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyAgreement
extendedKeyUsage = clientAuth
[ca]
default_ca = testca
[testca]
database = $d/index.txt
new_certs_dir = $d/newcerts
serial = $d/serial
certificate = $d/ca.pem
private_key = $d/ca.key
default_md = sha256
policy = pol_any
unique_subject = no
copy_extensions = none
[pol_any]
commonName = supplied
CNF
	(
		set -e
		cd "$d"
		export OPENSSL_CONF=$d/openssl.cnf
		ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
		for ca in ca other-ca; do
			openssl req -x509 "${ec[@]}" -config openssl.cnf -extensions v3_ca \
				-keyout "$ca.key" -out "$ca.pem" -days 3650 -subj "/CN=rlock test $ca"
		done
		openssl req -new "${ec[@]}" -config openssl.cnf -keyout server.key \
			-out server.csr -subj "/CN=rlock test server"
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-days 3650 -extfile openssl.cnf -extensions srv -out server.pem
		openssl ca -batch -config openssl.cnf -notext -startdate 20200101000000Z \
			-enddate 20200201000000Z -extfile openssl.cnf -extensions srv \
			-subj "/CN=rlock expired server" -in server.csr -out expired.pem
		openssl req -new "${ec[@]}" -config openssl.cnf -keyout client.key \
			-out client.csr -subj "/CN=rlock test client"
		openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-days 3650 -extfile openssl.cnf -extensions cli -out client.pem
		chmod 600 ./*.key
		cp ca.pem cadir/ca.pem
		openssl rehash cadir 2>/dev/null || c_rehash cadir
	) >"$d/gen.log" 2>&1 || {
		cat "$d/gen.log" >&2
		return 1
	}
	export TLS_CERTS=$d
}

# tls_cli PORT ARGS...: redis-cli over TLS (test CA + client cert) to 127.0.0.1:PORT.
tls_cli() {
	local port=$1
	shift
	redis-cli --tls --cacert "$TLS_CERTS/ca.pem" --cert "$TLS_CERTS/client.pem" \
		--key "$TLS_CERTS/client.key" -h 127.0.0.1 -p "$port" "$@"
}

# tls_redis_start [--cert FILE] [REDIS-SERVER ARGS...]: start a TLS-only redis-server
# (--port 0 --tls-port P) on a free loopback port serving FILE (default server.pem,
# key server.key), CA ca.pem, --tls-auth-clients no unless ARGS say otherwise. Waits
# (bounded) until it answers PING over TLS. Exports TLS_PORT, TLS_PID, TLS_DIR; the
# PID is stopped by redis_stop_all. Readiness uses the client certificate, so the
# same helper works with --tls-auth-clients yes.
# _tls_ready PORT: the TLS server answers PING (an expired server certificate fails
# verification: then ask without verifying).
_tls_ready() {
	tls_cli "$1" ping 2>/dev/null | grep -q PONG ||
		redis-cli --tls --insecure --cert "$TLS_CERTS/client.pem" \
			--key "$TLS_CERTS/client.key" -h 127.0.0.1 -p "$1" ping 2>/dev/null |
		grep -q PONG
}

tls_redis_start() {
	local cert=$TLS_CERTS/server.pem attempt dir port pid
	if [[ ${1:-} == --cert ]]; then
		cert=$2
		shift 2
	fi
	for ((attempt = 0; attempt < 5; attempt++)); do
		dir=$(mktemp -d "${BATS_FILE_TMPDIR:-${TMPDIR:-/tmp}}/tlsredis.XXXXXX")
		port=$(free_port) || return 1
		redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 \
			--tls-cert-file "$cert" --tls-key-file "$TLS_CERTS/server.key" \
			--tls-ca-cert-file "$TLS_CERTS/ca.pem" --tls-auth-clients no \
			--save '' --appendonly no --daemonize no --dir "$dir" "$@" \
			</dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
		pid=$!
		remember_server "$pid"
		local st=0
		_await_server tls_redis_start "$pid" "$dir" _tls_ready "$port" || st=$? # set -e
		case $st in
		0)
			export TLS_PORT=$port TLS_PID=$pid TLS_DIR=$dir
			return 0
			;;
		1) return 1 ;;
		esac
	done
	echo "tls_redis_start: redis-server failed to start 5 times; last log:" >&2
	cat "$dir/redis.log" >&2
	return 1
}

# rode_out_outage NAME SERVER WHY [TIMEOUT_S]: the background rlock ($RLOCK_PID) of lock
# NAME exits 0 (bounded, default 60 s) having run its job (file "ran"); its stderr
# starts with the outage's line (WHY, a regex) and ends with SERVER answering again (a
# progress line may come between them).
rode_out_outage() {
	rlock_wait "$RLOCK_PID" "${4:-60}"
	assert_equal "$RLOCK_STATUS" 0
	[[ -e ran ]] || fail "the job did not run"
	assert_regex "$(head -n 1 "$RLOCK_ERR")" "^rlock: lock '$1': $3; retrying for up to [0-9.]+ s \(--wait\)$"
	assert_regex "$(tail -n 1 "$RLOCK_ERR")" "^rlock: lock '$1': $2 answers again after [0-9.]+ s$"
}

# assert_one_line_error: $stderr (from run --separate-stderr) is exactly one line
# starting with "rlock: ".
assert_one_line_error() {
	local n
	n=$(printf '%s\n' "$stderr" | grep -c '')
	if [[ -z $stderr || $n -ne 1 || $stderr != "rlock: "* ]]; then
		echo "expected one line starting 'rlock: ' on stderr, got $n line(s):" >&2
		printf '%s\n' "$stderr" >&2
		return 1
	fi
}

# ---------------------------------------------------------------------------------
# the guarantee "the command's group is dead before the lease can end", measured

# death_watch: an observer outside the command's group that records (wall clock, ms)
# the moment the last holder of the write end of FIFO `dw` dies: the command opens it
# (`exec 9>dw`) and every process of its group inherits it. Precise, unlike polling.
death_watch() {
	mkfifo dw
	perl -MTime::HiRes=time -e 'open my $f, "<", "dw" or die; 1 while sysread $f, my $b, 1;
		printf "%d\n", time * 1000' >dead.ms 2>&1 3>&- 4>&- &
	track_pid $!
}

# dead_before LEASE_END_MS WHAT: the group was dead before LEASE_END_MS (wall clock);
# print the margin.
dead_before() {
	local lease_end=$1 what=$2 t_dead
	wait_until 30 test -s dead.ms || fail "$what: the command's group survived"
	t_dead=$(cat dead.ms)
	echo "# $what: command's group dead $((lease_end - t_dead)) ms before the lease could end" >&3
	((t_dead < lease_end)) || fail "$what: group dead $((t_dead - lease_end)) ms AFTER the lease end"
}

# lease_end [REDIS-CLI ARGS...] KEY: when (wall clock, ms) KEY expires on the server
# if nothing renews it: PEXPIRETIME, on the same machine's clock.
lease_end() {
	local t
	t=$(redis-cli -p "$REDIS_PORT" "${@:1:$#-1}" PEXPIRETIME "${@: -1}" 2>/dev/null | tail -1)
	((t > 0)) || return 1
	echo "$t"
}

# help_options: "--NAME ARG" for each option of rlock --help that takes a value (the
# option table of src/front/cli.c): the bad-input walks of usage.bats and config.bats.
help_options() {
	"$RLOCK" --help | sed -n '/^Lock:/,/^Durations/p' |
		grep -E '^  (-[a-zA-Z], |    )--[a-z]' | sed -E 's/^ +//; s/^-[a-zA-Z], //' |
		awk '$2 ~ /^[A-Z][][A-Z,]*$/ { print $1, $2 }'
}

# bad_values OPTION ARG: the values no option of its argument's kind takes, one a line
# (none for free text); fails for a kind it does not know, so a new kind is added here.
bad_values() {
	local junk=$'\x01\xff\xfe'
	case $2 in
	DUR) printf '%s\n' '' -1 99999999999999999999d 1e400ms '5 parsecs' 5sx "$junk" --wait nan inf ;;
	N) printf '%s\n' '' 99999999999999999999 1e400 5x "$junk" --wait nan ;;
	# '' is no path (--config '': none, as documented)
	FILE | DIR | PATH) [[ $1 == --config ]] || printf '\n' ;;
	NAME) printf '\n' ;;
	URL) printf '%s\n' '' nope://x "$junk" ;;
	TOKEN) printf '%s\n' '' nothex "$junk" --wait ;;
	ACTION | SIGNAL | FMT | 'L[,R]') printf '%s\n' '' x5 "$junk" --wait ;;
	STR | TEXT) ;; # any text (--label's length: usage.bats)
	*) return 1 ;;
	esac
}
