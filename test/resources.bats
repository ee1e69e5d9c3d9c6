#!/usr/bin/env bats
# A host short of resources: no process slot left (RLIMIT_NPROC, a pids cgroup at its
# max), no descriptor left (RLIMIT_NOFILE), no memory for a thread (RLIMIT_AS), an
# output nobody reads any more. Whatever runs short, and whenever: one clear line, a
# documented status, the command never left running unguarded, the lock never held
# past its TTL.

# shellcheck disable=SC2016,SC2153,SC2030,SC2031  # quoted $: for the command rlock runs;
# TLS_PORT from helpers; each @test is a subshell of its own
load helpers

setup_file() {
	common_setup_file
	# A TLS server that wants a client certificate: the most files to read.
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	tls_redis_start --tls-auth-clients yes
	export TLS_R_PORT=$TLS_PORT
}

setup() {
	common_setup
	tls_cli "$TLS_R_PORT" FLUSHALL >/dev/null
}

# make_step: ./step, a command's own child (a grandchild of rlock): records its pid
# and waits. PDEATHSIG never reaches it; only the watchdog (or rlock) can.
make_step() {
	cat >step <<'EOF'
#!/bin/sh
echo $$ >step.pid
touch started
exec sleep 60
EOF
	chmod +x step
}

# watchdog_of PID: the pid of rlock PID's watchdog process (comm rlock-watchdog).
watchdog_of() {
	local p
	for p in $(children_of "$1"); do
		if [[ $(cat "/proc/$p/comm" 2>/dev/null) == rlock-watchdog ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# unguarded_run_stops: rlock ($RLOCK_PID, its command ./step) has just lost its
# watchdog and can start no other: it stops the command, gives the lock back, exits 71
# with one line; it never runs on with nothing to stop the command if it were killed.
unguarded_run_stops() {
	rlock_wait "$RLOCK_PID" 20 ||
		fail "rlock runs on with no watchdog: killed now, its command would run unguarded ($(cat "$RLOCK_ERR"))"
	echo "# $(cat "$RLOCK_ERR")" >&3
	[[ $RLOCK_STATUS == 71 ]] || fail "status $RLOCK_STATUS, not 71: $(cat "$RLOCK_ERR")"
	track_pidfile step.pid
	wait_until 5 pidfile_gone step.pid || fail "the command's own child runs on"
	key_absent 'rlock:{g}' || fail "the lock was not given back"
	grep -q 'no new one can be started.*the command is stopped' "$RLOCK_ERR" ||
		fail "no line says why: $(cat "$RLOCK_ERR")"
}

@test "the watchdog dies while the command runs and no descriptor is left for a new one: the command is stopped, the lock given back, 71" {
	require_tool prlimit
	make_step
	rlock_bg --pgrp --kill-after 1s -k g -c './step; true'
	wait_until 30 test -e started
	local w
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	# rlock's descriptors all taken from now on: no pipe for a new watchdog
	prlimit --pid "$RLOCK_PID" --nofile=3:3
	kill -KILL "$w"
	unguarded_run_stops
}

@test "the watchdog dies, none can be started, and the lease ends before the retries are over: 71 (the host's fault, as without the loss), not 79" {
	require_tool prlimit
	make_step
	rlock_bg --pgrp --kill-after 1s -t 1s -k g -c './step; true'
	wait_until 30 test -e started
	local w
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	prlimit --pid "$RLOCK_PID" --nofile=3:3
	kill -KILL "$w"
	# the lease ends now (its next renewal, within 1/3 s, finds it gone), inside the
	# second in which rlock tries again to start a watchdog
	rcli DEL 'rlock:{g}' >/dev/null
	rlock_wait "$RLOCK_PID" 20
	sed 's/^/# /' "$RLOCK_ERR" >&3
	[[ $RLOCK_STATUS == 71 ]] || fail "status $RLOCK_STATUS, not 71: $(cat "$RLOCK_ERR")"
	grep -q 'watchdog process died and no new one can be started' "$RLOCK_ERR" ||
		fail "no line says why 71: $(cat "$RLOCK_ERR")"
	track_pidfile step.pid
	wait_until 5 pidfile_gone step.pid || fail "the command's own child runs on"
}

@test "the watchdog dies while the command runs and no process slot is left for a new one (RLIMIT_NPROC): the command is stopped, the lock given back, 71" {
	require_tool prlimit setpriv
	((EUID == 0)) || skip "needs root: to run rlock as another user, whose process limit binds"
	# An unprivileged user (root is exempt from RLIMIT_NPROC) in a directory it can use.
	local dir
	dir=$(mktemp -d /tmp/rlock-resources.XXXXXX)
	chmod 755 "$dir"
	chown 65534:65534 "$dir"
	echo "$dir" >dir.path
	cd "$dir"
	make_step
	export RLOCK_CONFIG=/dev/null
	RLOCK_ERR=$BATS_TEST_TMPDIR/rlock.err
	(clean_exec --pgrp setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$RLOCK" --kill-after 1s -k g -c './step; true') </dev/null >/dev/null 2>"$RLOCK_ERR" &
	RLOCK_PID=$!
	track_pid "$RLOCK_PID"
	wait_until 30 test -e started
	local w
	w=$(watchdog_of "$RLOCK_PID") || fail "no watchdog"
	setpriv --reuid=65534 --regid=65534 --clear-groups prlimit --pid "$RLOCK_PID" --nproc=1:1
	kill -KILL "$w"
	unguarded_run_stops
}

teardown() {
	common_teardown
	if [[ -f $BATS_TEST_TMPDIR/dir.path ]]; then
		local d
		d=$(cat "$BATS_TEST_TMPDIR/dir.path")
		[[ $d == /tmp/rlock-resources.* ]] && rm -rf -- "$d"
	fi
}

# vm_kb PID: the virtual size of PID in kB (VmSize).
vm_kb() { sed -n 's/^VmSize:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status"; }

@test "the renewal thread cannot start at its first renewal (no memory for its stack, for a moment): tried again, the run goes on and keeps its lock" {
	require_tool prlimit
	rlock_bg -t 3s -k g -- "$HOLD" r
	wait_until 30 test -e r.started
	track_pidfile r.pid
	# No room for a thread's stack (rlock starts its renewal thread at ttl/3: 1 s; its
	# stack is 512 KiB, thread.h: 64 KiB to spare is less) ...
	prlimit --pid "$RLOCK_PID" --as=$((($(vm_kb "$RLOCK_PID") + 64) * 1024)):
	wait_until 10 grep -q 'cannot start the renewal thread' "$RLOCK_ERR"
	# ... for half a second (the shortage itself, not a wait for readiness): the lease,
	# 2 s left, is not given up meanwhile
	sleep 0.5
	prlimit --pid "$RLOCK_PID" --as=unlimited:
	# renewed (a lease of 3 s again), not lost
	wait_until 10 eval '[[ $(rcli PTTL "rlock:{g}") -gt 2000 ]]' || fail "not renewed: $(cat "$RLOCK_ERR")"
	touch r.release
	rlock_wait
	echo "# $(cat "$RLOCK_ERR")" >&3
	[[ $RLOCK_STATUS == 0 ]] || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	[[ $(grep -c . "$RLOCK_ERR") == 1 ]] || fail "not one line: $(cat "$RLOCK_ERR")"
}

@test "a host with little memory (RLIMIT_AS 12 MiB): the renewal and lookup threads start (a modest stack, not 8 MiB), the run keeps its lock" {
	require_tool prlimit
	# The default thread stack (RLIMIT_STACK, 8 MiB) could not be mapped: the renewal
	# thread never started and the lease was lost (79).
	# a sanitizer build cannot even start there (ASan's shadow, its runtime's segments)
	if grep -qaE '__(asan|tsan|msan)_init' "$RLOCK" &&
		! prlimit --as=$((12 << 20)) "$RLOCK" --version >/dev/null 2>&1; then
		skip "a sanitizer build cannot start under 12 MiB of address space"
	fi
	# over TCP, by a name: the lookup thread too
	local -a url=()
	[[ $REDIS_PORT == 0 ]] || url=(-u "redis://localhost:$REDIS_PORT")
	run --separate-stderr timeout -k 5 20 prlimit --as=$((12 << 20)) "$RLOCK" "${url[@]}" \
		-t 1s -k m -- sh -c 'sleep 2; touch ran'
	[[ $status == 0 ]] || fail "status $status: $stderr"
	assert_equal "$stderr" ""
	[[ -e ran ]]
	key_absent 'rlock:{m}'
}

# to_gone_reader CMD...: run CMD with stdout on a pipe whose reader has left (every
# write fails with EPIPE, SIGPIPE ignored as rlock ignores it).
to_gone_reader() {
	perl -e 'pipe(my $r, my $w) or die; close $r;
		open(STDOUT, ">&", $w) or die; exec @ARGV or die' "$@"
}

@test "a report to a reader that left (rlock --list | head -1): 74, no line about it on stderr; --acquire still says why it gave the lock back" {
	local i
	for i in $(seq 1 2000); do echo "SET rlock:{n$i} t PX 600000"; done | rcli >/dev/null
	run -0 --separate-stderr bash -c 'set -o pipefail; "$RLOCK" --list | head -1 >/dev/null; echo "${PIPESTATUS[0]}"'
	assert_equal "$output" 74
	assert_equal "$stderr" ""
	for mode in --list '--list --json' '-k n1 --status' '-k n1 --status --json' '-k n1 --history' --help --version; do
		# shellcheck disable=SC2086  # the mode's words
		run -74 --separate-stderr to_gone_reader "$RLOCK" $mode
		[[ -z $stderr ]] || fail "rlock $mode: a line for a reader that left: $stderr"
	done
	# not silent where it matters: the token of --acquire, which nobody learns
	run -74 --separate-stderr to_gone_reader "$RLOCK" -k ac --acquire
	assert_regex "$stderr" 'cannot write to standard output: Broken pipe'
	wait_until 20 key_absent 'rlock:{ac}'
	# nor for a full disk
	if [[ -w /dev/full ]]; then
		run -74 --separate-stderr bash -c '"$RLOCK" --list >/dev/full'
		assert_regex "$stderr" 'cannot write to standard output: No space left'
	fi
}

@test "a descriptor limit at every step, sockets and TLS files too: the command runs, or it does not and rlock exits 71 (the host: not 69, the server's, nor 66, a file's), one line, nothing held" {
	require_tool prlimit
	local how n st args=()
	for how in tcp tls tlsdir; do
		case $how in
		tcp) args=() ;;
		tls) args=(-u "rediss://127.0.0.1:$TLS_R_PORT" --cacert "$TLS_CERTS/ca.pem") ;;
		tlsdir) args=(-u "rediss://127.0.0.1:$TLS_R_PORT" --cacertdir "$TLS_CERTS/cadir") ;;
		esac
		[[ $how == tcp ]] || args+=(--cert "$TLS_CERTS/client.pem" --tls-key "$TLS_CERTS/client.key")
		# from the first that gets past the dynamic loader to the first that runs it all
		for n in $(seq 4 24); do
			st=0
			(clean_exec prlimit --nofile="$n" "$RLOCK" "${args[@]}" -k r -- touch "ran.$how.$n") \
				</dev/null >/dev/null 2>"err.$how.$n" || st=$?
			echo "# $how, ulimit -n $n: status $st: $(head -c 200 "err.$how.$n")" >&3
			if ((st == 127)) && grep -q 'error while loading shared libraries' "err.$how.$n"; then
				continue # the dynamic loader's, before rlock runs
			elif ((st == 0)); then
				[[ -e ran.$how.$n ]] || fail "exit 0 but the command did not run ($how, ulimit -n $n)"
			else
				[[ ! -e ran.$how.$n ]] || fail "the command ran, yet rlock exited $st ($how, ulimit -n $n)"
				[[ $st == 71 ]] || fail "status $st, not 71 ($how, ulimit -n $n): $(cat "err.$how.$n")"
				[[ $(grep -c . "err.$how.$n") == 1 ]] || fail "not one line ($how, ulimit -n $n): $(cat "err.$how.$n")"
			fi
			key_absent 'rlock:{r}' || fail "lock left held ($how, ulimit -n $n)"
			[[ $(tls_cli "$TLS_R_PORT" EXISTS 'rlock:{r}') == 0 ]] || fail "lock left held ($how, ulimit -n $n)"
		done
	done
}

@test "stdout closed and no /dev/null to put there (a bare chroot or container): 71 with one line on the stderr that is open, nothing taken" {
	require_tool unshare
	((EUID == 0)) || skip "needs root: a mount namespace whose /dev is empty"
	run -71 --separate-stderr unshare -m sh -c 'mount -t tmpfs none /dev && exec "$RLOCK" -k nul -- touch ran >&-'
	assert_regex "$stderr" '^rlock: cannot open /dev/null for a closed standard descriptor: No such file or directory$'
	[[ ! -e ran ]]
	key_absent 'rlock:{nul}'
}

# nofile_sweep WHAT KEY-CHECK RLOCK-ARGS...: rlock ARGS -k r -- touch ran.N under every
# ulimit -n from 4 to 24: it runs the command (0), or exits 71 without running it,
# saying why in its last line (a warning may come before: a Redlock node missing), and
# KEY-CHECK (a command) finds rlock:{r} held nowhere afterwards.
nofile_sweep() {
	local what=$1 check=$2 n st
	shift 2
	for n in $(seq 4 24); do
		st=0
		(clean_exec timeout 30 prlimit --nofile="$n" "$RLOCK" "$@" -k r -- touch "ran.$what.$n") \
			</dev/null >/dev/null 2>"err.$what.$n" || st=$?
		echo "# $what, ulimit -n $n: status $st: $(tail -n 1 "err.$what.$n" | head -c 200)" >&3
		if ((st == 127)) && grep -q 'error while loading shared libraries' "err.$what.$n"; then
			continue
		elif ((st == 0)); then
			[[ -e ran.$what.$n ]] || fail "exit 0 but the command did not run ($what, ulimit -n $n)"
		else
			[[ ! -e ran.$what.$n ]] || fail "the command ran, yet rlock exited $st ($what, ulimit -n $n)"
			[[ $st == 71 ]] || fail "status $st, not 71 ($what, ulimit -n $n): $(cat "err.$what.$n")"
			[[ $(grep -vc 'Redlock degraded' "err.$what.$n") == 1 ]] ||
				fail "not one line ($what, ulimit -n $n): $(cat "err.$what.$n")"
		fi
		"$check" || fail "lock left held ($what, ulimit -n $n)"
	done
}

@test "a descriptor limit at every step through Sentinel and over a Redlock quorum: 0, or 71 (not 69: the nodes were never asked; never a wait for ever), nothing held" {
	require_tool prlimit
	load sentinel
	local main=$REDIS_PORT p1 p2
	redis_start
	p1=$REDIS_PORT
	redis_start
	p2=$REDIS_PORT
	REDIS_PORT=$main
	held_nowhere() {
		local p
		for p in "$main" "$p1" "$p2"; do
			[[ $(redis-cli -p "$p" EXISTS 'rlock:{r}') == 0 ]] || return 1
		done
	}
	# --node-timeout: the default 200 ms, missed by a node on a loaded machine, adds a
	# "no Redlock quorum ... retrying" line that has nothing to do with the limit
	nofile_sweep redlock held_nowhere --node-timeout 5s \
		-u "redis://127.0.0.1:$main,redis://127.0.0.1:$p1,redis://127.0.0.1:$p2"
	sentinel_topology_start
	master_free() { [[ $(sent_cli "$SENT_MASTER_PORT" EXISTS 'rlock:{r}') == 0 ]]; }
	nofile_sweep sentinel master_free -u "$SENT_URL"
}
