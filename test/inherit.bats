#!/usr/bin/env bats
# shellcheck disable=SC2016  # quoted $: for the perl and sh that run the commands
# What rlock inherits from its caller (issue 33): signal dispositions, the mask,
# limits. What rlock relies on is normalised at start, for rlock, its watchdog and the
# keeper; what the command inherits is handed on as the caller gave it.

load helpers

# given PERL-CODE CMD ARGS...: exec CMD with the process state PERL-CODE sets up (a
# caller that ignores SIGCHLD, blocks a signal, ...): every other signal at its default
# and the mask empty (bats' own state is no caller's), descriptors >= 3 closed.
given() {
	local code=$1
	shift
	exec perl -e '
use POSIX ();
for my $fd (3 .. 1023) { POSIX::close($fd); }
for my $sig (1 .. 31) {
	next if $sig == 9 || $sig == 19;
	POSIX::sigaction($sig, POSIX::SigAction->new("DEFAULT"));
}
POSIX::sigprocmask(POSIX::SIG_SETMASK(), POSIX::SigSet->new());
'"$code"'
exec { $ARGV[0] } @ARGV or do { print STDERR "exec $ARGV[0]: $!\n"; exit 127 };
' "$@"
}

# snap FILE [STATUS]: the command: a copy of its own /proc/self/status into FILE, then
# exit STATUS. In C: sh changes its own mask and SIGCHLD, perl resets an ignored SIGCHLD.
setup_file() {
	common_setup_file
	export SNAP=$BATS_FILE_TMPDIR/snap
	"${CC:-cc}" -O -o "$SNAP" -x c - <<'EOF_C'
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	FILE *in = fopen("/proc/self/status", "r"), *out;
	char line[512];

	if (argc < 2 || !in || !(out = fopen(argv[1], "w")))
		return 99;
	while (fgets(line, sizeof line, in))
		fputs(line, out);
	return fclose(out) ? 99 : argc > 2 ? atoi(argv[2]) : 0;
}
EOF_C
}

# has_sig MASK SIG: bit SIG is set in MASK (hex, as /proc/PID/status shows it).
has_sig() { (((0x$1 >> ($2 - 1)) & 1)); }

# status_field FILE NAME: the value of NAME (SigIgn, SigBlk...) in a copy of
# /proc/PID/status.
status_field() { sed -n "s/^$2:[[:space:]]*//p" "$1"; }

@test "a caller that ignores SIGCHLD: rlock sees its command end, and hands SIGCHLD on ignored" {
	# With SIGCHLD ignored the kernel reaps the command itself and sends no SIGCHLD:
	# on the old code rlock never saw it end and renewed the lock forever.
	run -3 timeout -k 1 30 bash -c "$(declare -f given); given '\$SIG{CHLD} = \"IGNORE\";' \
		\"\$RLOCK\" -k chld -t 3s -- \"\$SNAP\" cmd.status 3"
	key_absent 'rlock:{chld}'
	has_sig "$(status_field cmd.status SigIgn)" 17
}

@test "a caller that ignores SIGCHLD: SIGTERM (timeout(1), systemd) still ends rlock and its command" {
	(given '$SIG{CHLD} = "IGNORE";' "$RLOCK" -k term -- "$HOLD" term) 2>term.err &
	local pid=$!
	track_pid "$pid"
	wait_until 30 test -e term.started
	track_pidfile term.pid
	kill -TERM "$pid"
	# the old code forwarded it, never saw the command end, and renewed on
	rlock_wait "$pid" 30
	((RLOCK_STATUS == 128 + 15))
	key_absent 'rlock:{term}'
}

@test "--acquire under a caller that ignores SIGCHLD: a busy lock's status is the keeper's (75)" {
	# The parent waits for the keeper's status: with SIGCHLD ignored the kernel reaped
	# the keeper unseen and the old code said 70 (waitpid: ECHILD).
	rcli SET 'rlock:{busyk}' someone PX 60000 >/dev/null
	run -75 timeout -k 1 30 bash -c "$(declare -f given); given '\$SIG{CHLD} = \"IGNORE\";' \
		\"\$RLOCK\" -k busyk -n --acquire"
	assert_output --partial '(exit 75)'
}

@test "a stderr pipe whose reader is gone: -v lines are lost, the job runs and its status is rlock's" {
	# The reader closed before rlock starts: the first -v line meets EPIPE (the old
	# code died of SIGPIPE there, 141, and the command never ran).
	run -4 timeout -k 1 30 perl -e '
$SIG{PIPE} = "DEFAULT";
pipe(my $r, my $w) or die; close $r; open(STDERR, ">&", $w) or die; close $w;
exec { $ARGV[0] } @ARGV or exit 127;
' "$RLOCK" -vv -k pipe -- "$SNAP" cmd.status 4
	key_absent 'rlock:{pipe}'
	# the caller's SIGPIPE, default, is the command's
	run ! has_sig "$(status_field cmd.status SigIgn)" 13
}

@test "--acquire -v with a stderr pipe whose reader is gone: the keeper holds, --release releases" {
	run -0 timeout -k 1 30 perl -e '
$SIG{PIPE} = "DEFAULT";
pipe(my $r, my $w) or die; close $r; open(STDERR, ">&", $w) or die; close $w;
exec { $ARGV[0] } @ARGV or exit 127;
' "$RLOCK" -v --acquire -k kpipe
	eval "$output"
	[[ -n ${RLOCK_TOKEN:-} ]]
	key_exists 'rlock:{kpipe}'
	run -0 timeout -k 1 30 "$RLOCK" -k kpipe --token "$RLOCK_TOKEN" --release
	key_absent 'rlock:{kpipe}'
}

# waiting NAME: an rlock waits for lock NAME.
waiting() { (($(waiters "$1") >= 1)); }

# pending PID SIG: SIG is pending for PID (process-wide or for its main thread).
pending() {
	local f
	f=$(cat "/proc/$1/status" 2>/dev/null) || return 1
	has_sig "$(sed -n 's/^ShdPnd:[[:space:]]*//p' <<<"$f")" "$2" ||
		has_sig "$(sed -n 's/^SigPnd:[[:space:]]*//p' <<<"$f")" "$2"
}

@test "a signal the caller ignores (nohup's SIGHUP) does not end a wait, and reaches the command ignored" {
	start_holder busy
	(given '$SIG{HUP} = "IGNORE";' "$RLOCK" -w 60 -k busy -- "$SNAP" cmd.status) \
		>waiter.out 2>waiter.err &
	local pid=$!
	track_pid "$pid"
	wait_until 30 waiting busy
	kill -HUP "$pid"
	# Ignored: discarded at once. Blocked for the signalfd (the old code): read, and
	# rlock died of it (129) while it waited.
	wait_until 10 not pending "$pid" 1
	proc_alive "$pid"
	touch busy.release
	rlock_wait "$pid" 30
	cat waiter.err
	((RLOCK_STATUS == 0))
	has_sig "$(status_field cmd.status SigIgn)" 1
}

@test "the caller's mask and ignored SIGPIPE and SIGINT reach the command as given" {
	run -0 given 'POSIX::sigprocmask(POSIX::SIG_BLOCK(), POSIX::SigSet->new(POSIX::SIGUSR2()));
$SIG{PIPE} = "IGNORE"; $SIG{INT} = "IGNORE";' \
		"$RLOCK" -k mask -- "$SNAP" cmd.status
	has_sig "$(status_field cmd.status SigBlk)" 12
	run ! has_sig "$(status_field cmd.status SigBlk)" 13 # rlock's own block of SIGPIPE
	run ! has_sig "$(status_field cmd.status SigBlk)" 17 # nor its SIGCHLD
	has_sig "$(status_field cmd.status SigIgn)" 13
	has_sig "$(status_field cmd.status SigIgn)" 2
}

@test "fds 0-2 the caller closed: rlock works on /dev/null there, the command gets them closed" {
	# rlock's Redis socket never takes fd 2 (its -v lines would go into the protocol);
	# the command gets what the caller gave, as with flock(1) and timeout(1) (the old
	# code handed it rlock's /dev/null).
	run -0 bash -c 'exec "$RLOCK" -vv -k std -- sh -c "for fd in 0 1 2; do
		[ -e /proc/\$\$/fd/\$fd ] && echo \$fd open >>fds || echo \$fd closed >>fds; done" <&- 2>&-'
	assert_equal "$(cat fds)" "$(printf '0 closed\n1 open\n2 closed')"
	key_absent 'rlock:{std}'
}

@test "--acquire with stdout closed: nobody would learn the token, so no keeper takes the lock (74)" {
	run --separate-stderr bash -c 'exec "$RLOCK" -k noout --acquire >&-'
	local pid
	pid=$(rcli HGET 'rlock:{noout}:owner' pid)
	[[ -z $pid ]] || track_pid "$pid"
	# the old code: 0, and a keeper renewing a lock whose token nobody has
	((status == 74))
	key_absent 'rlock:{noout}'
	run -74 bash -c 'exec "$RLOCK" -k noout --status >&-'
	assert_output --partial 'standard output'
}

@test "a low soft RLIMIT_NOFILE: rlock raises its own within the hard limit, the command gets the caller's" {
	# The old code ran out of descriptors (an eventfd, the watchdog's pipes): 71.
	run -0 bash -c 'ulimit -Sn 8 && exec "$RLOCK" -k nofile -- sh -c "ulimit -Sn"'
	[[ $output == 8 ]]
}

@test "rlock writes no core file (it holds the password): its soft RLIMIT_CORE is 0, the command's the caller's" {
	local want=1000
	[[ $(ulimit -Hc) == unlimited ]] || (($(ulimit -Hc) >= want)) || want=$(ulimit -Hc)
	ulimit -Sc "$want"
	# (an AddressSanitizer build would zero the limit itself before main)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}disable_coredump=0 start_holder core
	grep -E '^Max core file size +0 ' "/proc/$HOLDER_PID/limits"
	grep -E "^Max core file size +$((want * 1024)) " "/proc/$(cat core.pid)/limits"
	touch core.release
	rlock_wait "$HOLDER_PID"
	((RLOCK_STATUS == 0))
}

# Who a pid names: a keeper is stopped by --release only if it is the process that
# recorded itself as the hold's keeper (this boot, this pid namespace, its start time).

# keeper_script: ns.sh NAME [OTHER], run in a fresh pid namespace: take NAME with a
# keeper (NAME.token); with OTHER, once `go` exists, release OTHER with its token
# (release.err, release.rc), then count the keepers still running in the namespace
# (NAME.keepers) and release NAME; wait for NAME.end (bounded).
keeper_script() {
	cat >ns.sh <<'EOF_SH'
name=$1 other=${2:-}
eval "$("$RLOCK" --acquire -k "$name" -t 60s)" || exit 9
echo "$RLOCK_TOKEN" >"$name.token"
touch "$name.up"
if [ -n "$other" ]; then
	i=0
	while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	"$RLOCK" -v -k "$other" --token "$(cat "$other.token")" --release 2>release.err
	echo $? >release.rc
	grep -l rlock-keeper /proc/[0-9]*/comm 2>/dev/null | wc -l >"$name.keepers"
	"$RLOCK" -k "$name" --token "$RLOCK_TOKEN" --release 2>>release.err
	touch release.done
fi
i=0
while [ ! -e "$name.end" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
EOF_SH
}

private_runtime_dir() {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
}

@test "--release stops no other lock's keeper that has the recorded pid in a new pid namespace" {
	require_tool unshare
	unshare --pid --fork --kill-child --mount-proc true 2>/dev/null ||
		ci_skip "unshare of a pid namespace is not permitted (needs root)"
	private_runtime_dir
	keeper_script
	# A container's run: its keeper holds `first`; the container goes (its keeper with
	# it, unreleased: the lock lives on for its ttl).
	timeout 60 unshare --pid --fork --kill-child --mount-proc sh ns.sh first &
	local ns1=$!
	track_pid "$ns1"
	wait_until 30 test -e first.up
	local pid1
	pid1=$(rcli HGET 'rlock:{first}:owner' pid)
	touch first.end
	wait_until 30 proc_gone "$ns1"
	key_exists 'rlock:{first}'
	# The next run: the same start-up gives its keeper (of `second`) the same pid.
	timeout 60 unshare --pid --fork --kill-child --mount-proc sh ns.sh second first &
	local ns2=$!
	track_pid "$ns2"
	wait_until 30 test -e second.up
	[[ $(rcli HGET 'rlock:{second}:owner' pid) == "$pid1" ]]
	touch go
	wait_until 30 test -e release.done
	cat release.err
	[[ $(cat release.rc) == 0 ]]
	key_absent 'rlock:{first}'
	# the old code: "keeper pid 3 stopped" (second's keeper, which exits unreleased)
	run ! grep -q 'keeper pid .* stopped' release.err
	[[ $(cat second.keepers) == 1 ]]
	touch second.end
	wait_until 30 proc_gone "$ns2"
}

@test "--release stops no keeper whose pid the lock's record names but whose record here says otherwise" {
	private_runtime_dir
	# first's keeper dies unreleased (a reboot, a kill -9): its record stays.
	eval "$(rlock --acquire -k first -t 60s)"
	local tok1=$RLOCK_TOKEN pid1
	pid1=$(rcli HGET 'rlock:{first}:owner' pid)
	track_pid "$pid1"
	kill -KILL "$pid1"
	wait_until 10 proc_gone "$pid1"
	# second's keeper now has the pid first's records name (forged here: on a reboot
	# or in a new pid namespace the same start-up gives it the same pid).
	eval "$(rlock --acquire -k second -t 60s)"
	local tok2=$RLOCK_TOKEN pid2
	pid2=$(rcli HGET 'rlock:{second}:owner' pid)
	track_pid "$pid2"
	rcli HSET 'rlock:{first}:owner' pid "$pid2" >/dev/null
	# first's record of its keeper, its pid and start time now second's, from a boot
	# before this one
	local f p mine="" start ns
	for f in "$XDG_RUNTIME_DIR"/rlock/keeper-*; do
		[[ -e $f ]] || continue # (the old code kept no such record)
		read -r p start ns _ <"$f"
		[[ $p == "$pid2" ]] && mine=$start.$ns
	done
	for f in "$XDG_RUNTIME_DIR"/rlock/keeper-*; do
		[[ -e $f ]] && read -r p _ <"$f" && [[ $p == "$pid1" ]] || continue
		echo "$pid2 ${mine%.*} ${mine#*.} 00000000-0000-0000-0000-000000000000" >"$f"
	done
	run -0 rlock -v -k first --token "$tok1" --release
	# the old code: "keeper pid N stopped" (second's keeper)
	refute_output --partial stopped
	assert_output --partial 'no keeper of this lock runs on this host'
	proc_alive "$pid2"
	# first's stale record is gone with its release
	run ! grep -rqs 00000000-0000 "$XDG_RUNTIME_DIR/rlock"
	run -0 rlock -v -k second --token "$tok2" --release
	assert_output --partial "keeper pid $pid2 stopped"
}

# copier_foreground: the command rlock runs for lock `tstp` (a perl copier) owns the
# terminal.
copier_foreground() {
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{tstp}:owner' pid)
	cpid=$(ps -o pid=,comm= --ppid "$rpid" 2>/dev/null | awk '$2 == "perl" {print $1}')
	[[ -n $cpid ]] || return 1
	[[ $(ps -o tpgid= -p "$cpid" | tr -d ' ') == "$(ps -o pgid= -p "$cpid" | tr -d ' ')" ]]
}

@test "a caller that blocks SIGTSTP: Ctrl-Z still stops rlock with its command (the shell gets control back)" {
	require_tool script
	mkfifo tty-in
	(clean_exec script -qfec "bash --norc --noprofile -i" /dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	# rlock gets SIGTSTP blocked; its command unblocks it (so Ctrl-Z stops it) and copies
	# its input. The old code then sent itself the blocked SIGTSTP: it stayed running,
	# took the command on again, and the shell never got the terminal back.
	local unblock='use POSIX; sigprocmask(SIG_UNBLOCK, POSIX::SigSet->new(SIGTSTP));'
	printf '%s\n' "perl -e 'use POSIX; sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGTSTP)); exec @ARGV' $RLOCK -u $REDIS_URL -k tstp -- perl -e '$unblock \$| = 1; print while <STDIN>' > copied" >&5
	wait_until 30 key_exists 'rlock:{tstp}'
	wait_until 30 copier_foreground
	printf 'one\n' >&5
	wait_until 30 grep -q one copied
	printf '\032' >&5 # Ctrl-Z
	wait_until 30 grep -q Stopped tty-out
	printf 'echo shell-back > back\n' >&5
	wait_until 30 test -e back
	printf 'fg\n' >&5
	wait_until 30 copier_foreground
	printf 'two\n' >&5
	wait_until 30 grep -q two copied
	printf '\004' >&5 # Ctrl-D: end of the copier's input
	wait_until 30 key_absent 'rlock:{tstp}'
	printf 'echo rlock-exit=$? > exitcode\n' >&5
	wait_until 30 test -s exitcode
	printf 'exit\n' >&5
	exec 5>&-
	assert_equal "$(cat exitcode)" "rlock-exit=0"
}

@test "--status and --list judge a keeper by its record, not by a pid from another pid namespace" {
	require_tool unshare
	unshare --pid --fork --kill-child --mount-proc true 2>/dev/null ||
		ci_skip "unshare of a pid namespace is not permitted (needs root)"
	private_runtime_dir
	# shellcheck disable=SC2016  # for the sh in the namespace
	timeout 60 unshare --pid --fork --kill-child --mount-proc sh -c '
		eval "$("$RLOCK" --acquire -k inns -t 60s)" || exit 9
		touch inns.up
		i=0
		while [ ! -e inns.end ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
		"$RLOCK" -k inns --release' &
	local ns=$!
	track_pid "$ns"
	wait_until 30 test -e inns.up
	# Same host name, another pid namespace: its pid names another process here, or
	# none (the old code: "process 3 runs on this host", or "... is gone from this host").
	run -75 rlock -k inns --status
	refute_line --regexp '^  process '
	run -75 rlock -k inns --status --json
	assert_output --partial '"pid_alive":null'
	run -0 rlock --list
	refute_output --partial '[gone]'
	touch inns.end
	wait_until 30 proc_gone "$ns"
	key_absent 'rlock:{inns}'
	# A keeper in this namespace is still judged by its pid: alive, then gone.
	eval "$(rlock --acquire -k here -t 60s)"
	local pid
	pid=$(rcli HGET 'rlock:{here}:owner' pid)
	track_pid "$pid"
	run -75 rlock -k here --status
	assert_line "  process  $pid runs on this host"
	kill -KILL "$pid"
	wait_until 10 proc_gone "$pid"
	run -75 rlock -k here --status
	assert_line --partial "holder process $pid is gone from this host"
}

@test "--status and --list cannot tell a holder in another pid namespace by its pid (issue 33)" {
	require_tool unshare
	unshare --pid --fork --kill-child --mount-proc true 2>/dev/null ||
		ci_skip "unshare of a pid namespace is not permitted (needs root)"
	# Same host name, another pid namespace: the exclusive holder is pid 1 there, which
	# here is init (alive, started at boot: the old code said "runs"); the shared one's
	# pid names another process here, or none (the old code: "runs" or "gone").
	# shellcheck disable=SC2016  # for the sh in the namespace
	echo 'i=0; touch "$1.up"
		while [ ! -e ns.end ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done' >ns-hold
	timeout 60 unshare --pid --fork --kill-child --mount-proc sh -c '
		"$RLOCK" -s -k nss -t 60s -- sh ns-hold nss &
		exec "$RLOCK" -k nsx -t 60s -- sh ns-hold nsx' &
	local ns=$!
	track_pid "$ns"
	wait_until 30 test -e nsx.up
	wait_until 30 test -e nss.up
	assert_equal "$(rcli HGET 'rlock:{nsx}:owner' pid)" 1
	local name
	for name in nsx nss; do
		run -75 rlock -k "$name" --status
		refute_line --regexp '^  process '
		run -75 --separate-stderr rlock -k "$name" --status --json
		assert_equal "$(jq -r .pid_alive <<<"$output")" null
	done
	run -0 rlock --list
	refute_output --partial '[gone]'
	touch ns.end
	wait_until 30 proc_gone "$ns"
	key_absent 'rlock:{nsx}'
}

@test "an RLOCK_WARN_SIGNAL in the caller's environment reaches no command run without --warn; --warn's own, and a live ancestor's, do" {
	local show='echo "warn=${RLOCK_WARN_SIGNAL-unset}"'
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k A -- sh -c "$show"
	assert_output 'warn=unset'
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k A -k B -- sh -c "$show"
	assert_output 'warn=unset'
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock --warn USR1 -k A -- sh -c "$show"
	assert_output 'warn=USR1'
	# nested under a --warn run: its warning reaches the nested command (the nested
	# rlock passes the signal on), whether the run is granted its name or takes one
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock --warn USR1 -k A -- "$RLOCK" -k A -- sh -c "$show"
	assert_output 'warn=USR1'
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock --warn USR1 -k A -- "$RLOCK" -k B -- sh -c "$show"
	assert_output 'warn=USR1'
	# under an ancestor without --warn, nothing names a signal
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k A -- "$RLOCK" -k B -- sh -c "$show"
	assert_output 'warn=unset'
	# nor under a keeper (it sends no signal: its warning goes to its log), granted
	# whole or in part
	eval "$(rlock -k A -n --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k A -- sh -c "$show"
	assert_output 'warn=unset'
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k A -k B -- sh -c "$show"
	assert_output 'warn=unset'
	# nor when the keeper's lock is only passed on, not asked for (it was kept: the
	# server said the keeper's token holds it, as an ancestor rlock's would)
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock -k B -- sh -c "$show"
	assert_output 'warn=unset'
	# beside it, a live ancestor's --warn still reaches the command
	RLOCK_WARN_SIGNAL=USR2 run -0 rlock --warn USR1 -k C -- "$RLOCK" -k B -- sh -c "$show"
	assert_output 'warn=USR1'
	run -0 rlock -k A --release
	# nor under the variables of a --warn holder killed unheard: its lease lives on,
	# but nobody renews it or sends its signal
	rlock_bg --warn USR1 -t 30s -k D -- sh -c 'echo $$ >cmd.pid
env | grep -E "^RLOCK_(KEY|TOKEN|FENCE|WARN_SIGNAL)=" >dead.env; exec sleep 30'
	wait_until 10 test -s dead.env
	track_pidfile cmd.pid
	kill -KILL "$RLOCK_PID"
	rlock_wait
	wait_until 10 proc_gone "$(cat cmd.pid)" # its watchdog stops the command
	local -a dead
	mapfile -t dead <dead.env
	run -0 env "${dead[@]}" "$RLOCK" -k B -- sh -c "$show"
	assert_output 'warn=unset'
	rcli DEL 'rlock:{D}' >/dev/null
}
