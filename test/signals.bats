#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Signals (SPEC §5): INT TERM HUP QUIT USR1 USR2 reach the command exactly once, also
# when sent to the whole process group; rlock then exits with the command's status.
# If rlock itself is SIGKILLed, the command dies and the lock expires by its TTL.

load helpers

# sigcatch LOG READY: a tiny C program (bash traps coalesce repeated signals, so they
# cannot count deliveries). Logs one line per delivery of INT TERM HUP QUIT USR1 USR2
# with write(2) from the handler (with SIGCATCH_SENDER set, the sender's pid after the
# name); after the first one it lingers 500 ms to catch a duplicate, then exits 3.
# Writes its pid to READY once the handlers are installed.
setup_file() {
	common_setup_file
	export SIGCATCH=$BATS_FILE_TMPDIR/sigcatch
	"${CC:-cc}" -O -o "$SIGCATCH" -x c - <<'EOF_C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int logfd = -1, sender;
static volatile sig_atomic_t got;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	const char *s = sig == SIGINT ? "INT" : sig == SIGTERM ? "TERM" :
		sig == SIGHUP ? "HUP" : sig == SIGQUIT ? "QUIT" :
		sig == SIGUSR1 ? "USR1" : sig == SIGUSR2 ? "USR2" : "OTHER";
	char line[64];
	int len = sender ? snprintf(line, sizeof line, "%s %d\n", s, (int)si->si_pid)
	                 : snprintf(line, sizeof line, "%s\n", s);
	ssize_t n = write(logfd, line, (size_t)len);
	(void)n;
	(void)uc;
	got = 1;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
	struct sigaction sa;
	FILE *f;
	int i;

	if (argc != 3)
		return 2;
	logfd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return 2;
	sender = getenv("SIGCATCH_SENDER") != NULL;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 6; i++)
		sigaction(sigs[i], &sa, NULL);
	f = fopen(argv[2], "w");
	if (!f)
		return 2;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	for (i = 0; i < 3000 && !got; i++)
		nap_ms(10);
	if (!got)
		return 4;
	for (i = 0; i < 50; i++)
		nap_ms(10);
	return 3;
}
EOF_C
}

teardown() {
	track_pidfile c.pid
	track_pidfile g.pid
	track_pidfile s.ready
	track_pidfile r.pid
	common_teardown
}

# forward_once SIG [--group]: SIG sent to rlock (or to its whole process group) reaches
# the command exactly once; rlock exits with the command's status (3).
forward_once() {
	local sig=$1 target
	if [[ ${2:-} == --group ]]; then
		rlock_bg --pgrp -k s -- "$SIGCATCH" s.log s.ready
		target=-$RLOCK_PID
	else
		rlock_bg -k s -- "$SIGCATCH" s.log s.ready
		target=$RLOCK_PID
	fi
	wait_until 30 test -s s.ready
	kill -s "$sig" -- "$target"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$(cat s.log)" "$sig"
	assert_equal "$RLOCK_STATUS" 3
	key_absent 'rlock:{s}'
}

@test "SIGINT to rlock reaches the command exactly once" { forward_once INT; }
@test "SIGTERM to rlock reaches the command exactly once" { forward_once TERM; }
@test "SIGHUP to rlock reaches the command exactly once" { forward_once HUP; }
@test "SIGQUIT to rlock reaches the command exactly once" { forward_once QUIT; }
@test "SIGUSR1 to rlock reaches the command exactly once" { forward_once USR1; }
@test "SIGUSR2 to rlock reaches the command exactly once" { forward_once USR2; }

@test "SIGINT to the whole process group (terminal ^C) reaches the command once" {
	forward_once INT --group
}
@test "SIGTERM to the whole process group reaches the command once" {
	forward_once TERM --group
}
@test "SIGQUIT to the whole process group reaches the command once" {
	forward_once QUIT --group
}
@test "SIGHUP to the whole process group reaches the command once" {
	forward_once HUP --group
}

@test "a nested rlock's command hears its holder's loss SIGTERM once: from the nested rlock, which forwards it, not also from the holder" {
	# The holder stops its whole cover, the nested rlock's command's group among it;
	# the nested rlock, in the cover too, forwards the SIGTERM it gets. The old code
	# sent it straight to that group too: twice. Stopped, the nested rlock forwards only
	# after the holder's SIGCONT: a TERM of the holder's own would come first.
	SIGCATCH_SENDER=1 rlock_bg -t 3s -k o -- "$RLOCK" -k i -- "$SIGCATCH" s.log s.ready
	wait_until 30 test -s s.ready
	local nested
	nested=$(awk '{print $4}' "/proc/$(cat s.ready)/stat")
	kill -STOP "$nested"
	rcli DEL 'rlock:{o}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_equal "$(cat s.log)" "TERM $nested"
	key_absent 'rlock:{i}' # its command ended: the nested rlock released its lock
}

# reentered_once FIRST: a nested run of the holder's own name (re-entered: no lease of
# its own, it watches the holder's token) and its holder both find the lock gone (its
# key deleted) and stop their covers, FIRST the one that acts first (the other stopped
# meanwhile). Its command hears SIGTERM once, from the nested rlock (the old code: once
# forwarded, once for its own watch's loss, in either order).
reentered_once() {
	SIGCATCH_SENDER=1 rlock_bg -t 3s -k o -- "$RLOCK" -k o -- "$SIGCATCH" s.log s.ready
	wait_until 30 test -s s.ready
	local nested
	nested=$(awk '{print $4}' "/proc/$(cat s.ready)/stat")
	if [[ $1 == holder ]]; then
		kill -STOP "$nested" # continued by the holder's stop
		rcli DEL 'rlock:{o}' >/dev/null
	else
		kill -STOP "$RLOCK_PID"
		rcli DEL 'rlock:{o}' >/dev/null
		wait_until 30 test -s s.log
		kill -CONT "$RLOCK_PID"
	fi
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_equal "$(cat s.log)" "TERM $nested"
}

@test "a re-entered nested run whose holder loses the lock first: its command hears SIGTERM once, not again for its own watch's loss" {
	reentered_once holder
}

@test "a re-entered nested run that sees the loss before its holder: its command hears SIGTERM once, not again when the holder's comes" {
	reentered_once nested
}

@test "forwarded signal with default action: rlock exits 128+N" {
	rlock_bg -k s -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 143
	key_absent 'rlock:{s}' || fail "lock not released: $(rcli GET 'rlock:{s}') pttl $(rcli PTTL 'rlock:{s}')"
	rm -f c.pid
	rlock_bg -k s -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]' ||
		fail "second command did not start; rlock stderr: $(cat "$RLOCK_ERR"); lock: $(rcli GET 'rlock:{s}') pttl $(rcli PTTL 'rlock:{s}')"
	kill -INT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 130
	key_absent 'rlock:{s}'
}

@test "the command starts with default signal dispositions and an empty mask" {
	rlock_bg -k s -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]'
	local st
	st=$(cat "/proc/$(cat c.pid)/status")
	assert_regex "$st" $'SigBlk:\t0+\n'
	assert_regex "$st" $'SigIgn:\t0+\n'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
}

@test "SIGKILL of rlock: the command dies promptly, the lock expires by its TTL" {
	rlock_bg -t 1s -k s -- sh -c 'echo $$ >c.pid; exec sleep 60'
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]'
	track_pidfile c.pid
	key_exists 'rlock:{s}'
	local t0 t1
	t0=$(now_ms)
	kill -KILL "$RLOCK_PID"
	wait_until 30 pidfile_gone c.pid || fail "the command outlived a SIGKILLed rlock"
	t1=$(now_ms)
	echo "# command died $((t1 - t0)) ms after rlock was SIGKILLed" >&3
	wait_until 30 key_absent 'rlock:{s}'
	run -0 rlock -n -k s -- true
}

@test "SIGKILL of rlock: the command's background children die too" {
	# (the default lease: the watchdog acts when rlock dies, not when the lease ends; a 1 s
	# one could be lost on a slow pass before the kill, and the watchdog gone with rlock)
	rlock_bg -k s -- sh -c 'sleep 60 & echo $! >g.pid; echo $$ >c.pid; wait'
	wait_until 30 eval '[[ -s c.pid && -s g.pid ]]'
	track_pidfile c.pid
	track_pidfile g.pid
	kill -KILL "$RLOCK_PID"
	wait_until 30 pidfile_gone c.pid || fail "the command outlived a SIGKILLed rlock"
	wait_until 30 pidfile_gone g.pid ||
		fail "the command's child (pid $(cat g.pid)) kept running unprotected"
}

@test "a signal while waiting for the lock: rlock exits, the command never runs" {
	rcli SET 'rlock:{s}' someone-else PX 30000 >/dev/null
	rlock_bg -k s -- touch ran
	wait_until 30 eval '[[ $(waiters s) -ge 1 ]]'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	((RLOCK_STATUS != 0)) || fail "rlock exited 0 after SIGTERM while waiting"
	[[ ! -e ran ]]
	assert_equal "$(rcli GET 'rlock:{s}')" someone-else
}

@test "no helper process outlives a normal rlock exit" {
	rlock_bg -k s -- sh -c 'echo $$ >c.pid; exec sleep 30'
	wait_until 30 eval '[[ -s c.pid && $(cat /proc/$(cat c.pid)/comm 2>/dev/null) == sleep ]]'
	local kids
	kids=$(children_of "$RLOCK_PID")
	# shellcheck disable=SC2086 # one pid per word
	track_pid $kids
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	local k
	for k in $kids; do
		wait_until 30 proc_gone "$k" ||
			fail "rlock's child $k ($(cat "/proc/$k/comm" 2>/dev/null)) outlived it"
	done
}

@test "two signals sent apart are both delivered" {
	rlock_bg -k s -- "$SIGCATCH" s.log s.ready
	wait_until 30 test -s s.ready
	kill -USR1 "$RLOCK_PID"
	wait_until 30 test -s s.log
	kill -USR2 "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$(cat s.log)" $'USR1\nUSR2'
	assert_equal "$RLOCK_STATUS" 3
}

# reaped PARENT PID: PID is no longer a child of PARENT (reaped, not a zombie of it).
reaped() { ! children_of "$1" | grep -qx "$2"; }

@test "a signal that comes while rlock releases (the command gone) is not lost: released, rlock dies of it" {
	# the command freezes the server and exits 0: the release then waits (--io-timeout)
	rlock_bg --io-timeout 3s -k rel -- sh -c 'echo $$ >cmd.pid; kill -STOP "$REDIS_PID"'
	wait_until 30 test -s cmd.pid
	# reaped: rlock is past the command's supervision, in the release
	wait_until 30 reaped "$RLOCK_PID" "$(cat cmd.pid)"
	kill -TERM "$RLOCK_PID"
	local st=0
	rlock_wait "$RLOCK_PID" 30 || st=$?
	kill -CONT "$REDIS_PID"
	((st == 0)) || fail "rlock did not end"
	# before: 0, and a shell loop around rlock went on (the interrupt was lost)
	assert_equal "$RLOCK_STATUS" 143
	grep -q 'cannot release rlock:{rel}' "$RLOCK_ERR" || fail "the release was not tried: $(cat "$RLOCK_ERR")"
}

# late_stop PIDFILE RLOCK-ARGS... : the command (RLOCK-ARGS end with it) writes cmd.pid,
# starts a background job (its pid in g.pid) and exits 0; once rlock has reaped it,
# SIGTERM to the rlock whose pid is in PIDFILE ("" for rlock_bg's). rlock must die of it
# (143), the job with it, the lock released: before, the forwarded signal was spent on
# the group and rlock exited the command's 0 (a calling loop went on).
late_stop() {
	local target=$1
	shift
	rlock_bg "$@"
	wait_until 30 test -s g.pid
	wait_until 30 test -s cmd.pid
	if [[ -n $target ]]; then
		wait_until 30 test -s "$target"
		target=$(cat "$target")
	else
		target=$RLOCK_PID
	fi
	wait_until 30 reaped "$target" "$(cat cmd.pid)"
	kill -TERM "$target"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 143
	wait_until 30 proc_gone "$(cat g.pid)"
	key_absent 'rlock:{late}'
}

@test "a signal that comes after the command exited, while the rest of its cover runs: passed on to all of it, released, rlock dies of it; also a re-entered nested run" {
	local job='echo $PPID >r.pid; sleep 300 & echo $! >g.pid; echo $$ >cmd.pid; exit 0'
	late_stop "" -k late -- sh -c "$job"
	rm -f g.pid cmd.pid r.pid
	# the nested run's own SIGTERM (not through its holder): it dies of it, its holder
	# (whose command it is) with it
	late_stop r.pid -k late -- "$RLOCK" -k late -- sh -c "$job"
	rm -f g.pid cmd.pid r.pid
	# a job in a process group of its own (timeout(1) makes one): the command's group
	# is empty, the signal reaches the job's (before: nobody, rlock waited on for it)
	late_stop "" -k late -- sh -c "${job/sleep/timeout 300 sleep}"
}

# zombie PID: PID has exited and is not yet reaped (state Z).
zombie() { [[ $(_proc_field "$1" 3) == Z ]]; }

@test "a signal that comes with the command's exit (rlock reads it before it reaps the command): rlock dies of it, not the command's 0" {
	rlock_bg -k late -- sh -c 'echo $$ >cmd.pid; while [ ! -e go ]; do sleep 0.02; done; exit 0'
	wait_until 30 test -s cmd.pid
	# rlock stopped while the command exits, then SIGTERM: both wait in its signalfd,
	# SIGTERM read first (the lower number), the command a zombie not yet reaped
	kill -STOP "$RLOCK_PID"
	touch go
	wait_until 30 zombie "$(cat cmd.pid)"
	kill -TERM "$RLOCK_PID"
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 143
	key_absent 'rlock:{late}'
}

# make_beat: ./beat writes its pid to c.pid, then a line to beats every 50 ms, in one
# process: a shell loop forks at each turn, and a SIGTSTP that stops the child before
# its exec (dash uses vfork) leaves the shell waiting for it, never stopped itself.
make_beat() {
	cat >beat <<'PL'
#!/usr/bin/perl
open my $p, '>', 'c.pid' or die; print $p "$$\n"; close $p;
open my $f, '>>', 'beats' or die; $f->autoflush(1);
while (1) { print $f "x\n"; select undef, undef, undef, 0.05; }
PL
	chmod +x beat
}

# stopped PID: PID is stopped (state T)
stopped() { [[ $(ps -o stat= -p "$1" | cut -c1) == T ]]; }

@test "SIGTSTP to rlock (no terminal): the command stops too, rlock once it has; SIGCONT to rlock continues both, the lock kept" {
	make_beat
	rlock_bg --pgrp -t 2s -k s -- ./beat
	wait_until 30 file_has_lines beats 3
	track_pidfile c.pid
	local cpid before
	cpid=$(cat c.pid)
	kill -TSTP "$RLOCK_PID"
	wait_until 30 stopped "$cpid" || fail "the command runs on while rlock is stopped"
	wait_until 30 stopped "$RLOCK_PID"
	before=$(wc -l <beats)
	kill -CONT "$RLOCK_PID"
	wait_until 30 not stopped "$cpid"
	wait_until 30 file_has_lines beats $((before + 3))
	key_exists 'rlock:{s}'
	kill -TERM "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 143
}

@test "SIGTSTP to an rlock in a session of its own (setsid, a service: no shell can continue it): discarded as the kernel discards it; the command runs on, the lock kept" {
	# rlock leads its own session: its process group is orphaned, and a plain process
	# there ignores a SIGTSTP (POSIX); rlock stopped for good, the lease ran out and
	# the watchdog killed the command, with nobody to continue rlock
	make_beat
	(clean_exec setsid "$RLOCK" -t 1s -k orph -- ./beat) </dev/null >out 2>err &
	local r=$! before
	track_pid "$r"
	wait_until 30 file_has_lines beats 3
	track_pidfile c.pid
	kill -TSTP "$r"
	# three leases long: neither rlock nor its command stops
	run ! wait_until 3 eval 'stopped "$r" || stopped "$(cat c.pid)"'
	before=$(wc -l <beats)
	wait_until 30 file_has_lines beats $((before + 3)) || fail "the command stopped"
	key_exists 'rlock:{orph}'
	kill -TERM "$r"
	rlock_wait "$r" 30
	assert_equal "$RLOCK_STATUS" 143
}

@test "the command ended, a slow server (replies later than ttl/3): the renewal thread stops at once, the release is made inside the lease, not 4 s later or never" {
	# Renewals slower than ttl/3 followed each other with no nap between them, and the
	# thread only looked at its stop in a nap: the end waited renew_stop's bound (4 s),
	# meanwhile the thread renewed on after the command had ended, and the release,
	# judged from the send before, found the lease over and gave nothing back.
	# the scripts loaded (a renewal among them): one round trip each
	"$RLOCK" -u "$REDIS_URL" -t 300ms -k slowrn -- sleep 0.25
	delay_proxy_start 1200
	# (no -v: its eviction check at the start would take a slow round trip more)
	local t0
	t0=$(now_ms)
	run -0 --separate-stderr "$RLOCK" -u "$PROXY_URL" -t 3300ms -k slowrn -- sleep 0.2
	echo "# $(($(now_ms) - t0)) ms: $stderr" >&3
	[[ -z $stderr ]] || fail "stderr: $stderr"
	key_absent 'rlock:{slowrn}' # released, not left to a TTL the thread kept renewing
	(($(now_ms) - t0 < 5500)) || fail "the end waited for the renewal thread's bound"
}
