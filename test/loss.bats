#!/usr/bin/env bats
# Lock loss decided and enforced by the supervisor (SPEC §3, §5): a deadline on the main
# thread that nothing the renewal thread waits on can delay; SIGKILL before the lease
# can end whatever --kill-after says; escalation over the whole process group; a
# release that finds the token gone is a loss (79); the release does not trust the
# connection that sat idle for the whole run.

# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
load helpers

PASS=loss-test-secret

teardown() {
	# Undo a password set by a test (the next test's FLUSHALL must get through).
	redis-cli -p "$REDIS_PORT" -a "$PASS" --no-auth-warning CONFIG SET requirepass '' \
		>/dev/null 2>&1 || true
	common_teardown
}

# renewal_connected: the renewal thread has its connection (opened at its first
# renewal, ttl/3 after the acquire): rlock's main connection and the thread's besides
# our own.
renewal_connected() {
	(($(rcli CLIENT LIST | grep -vc 'cmd=client') >= 2))
}

@test "a renewal thread stuck in connect() forever cannot delay the loss: dead before the lease ends" {
	# A shim whose connect() (and getaddrinfo()) hang in any thread but the main one
	# once TRIGGER exists: a renewal thread stuck in a call with no deadline at all.
	cat >hang.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
static void hang(void)
{
	const char *t = getenv("HANG_TRIGGER");
	if (t && syscall(SYS_gettid) != getpid() && access(t, F_OK) == 0)
		for (int i = 0; i < 120; i++)
			sleep(1);
}
int connect(int fd, const struct sockaddr *a, socklen_t l)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	if (!real)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	hang();
	return real(fd, a, l);
}
int getaddrinfo(const char *n, const char *s, const struct addrinfo *h, struct addrinfo **r)
{
	static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	if (!real)
		real = (int (*)(const char *, const char *, const struct addrinfo *,
		                struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
	hang();
	return real(n, s, h, r);
}
C
	"${CC:-cc}" -shared -fPIC -o hang.so hang.c -ldl
	death_watch # first: else the command makes dw a plain file
	HANG_TRIGGER=$PWD/trigger LD_PRELOAD=$PWD/hang.so \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		rlock_bg -t 5s -k hang -- sh -c 'exec 9>dw; echo $$ > cmd.pid; touch started; exec sleep 60'
	wait_until 10 test -e started
	track_pidfile cmd.pid
	wait_until 10 renewal_connected
	touch trigger
	# Cut both of rlock's connections: the renewal thread must reconnect, and hangs.
	rcli CLIENT KILL TYPE normal >/dev/null
	local end
	end=$(lease_end 'rlock:{hang}') || fail "no lease left to measure against"
	dead_before "$end" "renewal stuck in connect, ttl 5s"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	grep -q 'lock lost: no renewal confirmed in time' "$RLOCK_ERR"
}

@test "--kill-after longer than the lease: SIGKILL still lands before the lease can end; said once" {
	# The whole group ignores SIGTERM; the default --kill-after is 10 s, the lease 4 s.
	death_watch # first: else the command makes dw a plain file
	rlock_bg -t 4s -k clamp -- perl -e '$SIG{TERM} = "IGNORE"; open my $d, ">", "dw";
		open my $f, ">", "cmd.pid"; print $f "$$\n"; close $f; sleep 1 while 1'
	wait_until 10 test -s cmd.pid
	track_pidfile cmd.pid
	wait_until 10 renewal_connected
	# Renewals now fail (NOAUTH on a fresh connection), while the test can still read.
	rcli CONFIG SET requirepass "$PASS" >/dev/null
	redis-cli -p "$REDIS_PORT" -a "$PASS" --no-auth-warning CLIENT KILL TYPE normal >/dev/null
	local end
	end=$(lease_end -a "$PASS" --no-auth-warning 'rlock:{clamp}') ||
		fail "no lease left to measure against"
	dead_before "$end" "SIGTERM ignored, --kill-after 10s, ttl 4s"
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	assert_equal "$(grep -c 'SIGKILL in [0-9]* ms (before the lease can end; not after --kill-after 10000 ms)' "$RLOCK_ERR")" 1
	grep -q 'sending SIGKILL' "$RLOCK_ERR"
}

@test "after a loss, a group member that ignores SIGTERM is killed even when the command exits first" {
	# The command exits on SIGTERM at once; the process it started ignores SIGTERM.
	# (the member says its pid once it ignores SIGTERM: a loss before that would kill it
	# with the TERM and leave nothing to SIGKILL)
	rlock_bg -t 3s --kill-after 500ms -k grp -- sh -c '
		perl -e "\$SIG{TERM} = q(IGNORE); open my \$f, q(>), q(member.pid.tmp) or die;
			print \$f qq(\$\$\n); close \$f; rename q(member.pid.tmp), q(member.pid); sleep 1 while 1" &
		exec sleep 60'
	wait_until 10 test -s member.pid
	track_pidfile member.pid
	rcli SET 'rlock:{grp}' stolen PX 60000 >/dev/null
	rlock_wait "$RLOCK_PID" 15
	assert_equal "$RLOCK_STATUS" 79
	# rlock returns only once the group is empty
	pidfile_gone member.pid || fail "a member of the command's group survived the loss"
	grep -q 'sending SIGKILL' "$RLOCK_ERR"
	assert_equal "$(rcli GET 'rlock:{grp}')" stolen
}

@test "lock deleted while the command ran, found at release: one line, exit 79" {
	run -79 --separate-stderr rlock -t 60s -k gone -- sh -c "redis-cli -p $REDIS_PORT DEL 'rlock:{gone}' >/dev/null"
	assert_one_line_error
	assert_regex "$stderr" 'lock lost: .*no longer held when the command ended'
}

@test "lock taken over while the command ran (flush + new holder), found at release: exit 79" {
	run -79 --separate-stderr rlock -t 60s -k over -- sh -c \
		"redis-cli -p $REDIS_PORT FLUSHALL >/dev/null; redis-cli -p $REDIS_PORT SET 'rlock:{over}' other PX 60000 >/dev/null; exit 3"
	assert_one_line_error
	assert_equal "$(rcli GET 'rlock:{over}')" other
}

@test "lock gone at release with --on-lost ignore: a warning, the command's own status" {
	run -3 --separate-stderr rlock --on-lost ignore -t 60s -k ign -- sh -c "redis-cli -p $REDIS_PORT DEL 'rlock:{ign}' >/dev/null; exit 3"
	assert_one_line_error
	assert_regex "$stderr" 'no longer held'
	# -q keeps it: with ignore, that line is the only way to tell mutual exclusion failed
	run -3 --separate-stderr rlock -q --on-lost ignore -t 60s -k ign -- sh -c "redis-cli -p $REDIS_PORT DEL 'rlock:{ign}' >/dev/null; exit 3"
	assert_one_line_error
	assert_regex "$stderr" 'no longer held'
}

@test "lock lost while the command runs, --on-lost ignore -q: the loss is still said" {
	# the command deletes the lock, then waits (bounded) until rlock has said it lost it
	cat >cmd.sh <<EOF
redis-cli -p $REDIS_PORT DEL 'rlock:{ign2}' >/dev/null
i=0
until grep -q 'lock lost' err; do i=\$((i + 1)); [ \$i -lt 600 ] || exit 9; sleep 0.05; done
EOF
	local st=0
	rlock -q --on-lost ignore -t 1500ms -k ign2 -- sh cmd.sh 2>err || st=$?
	((st == 0)) || fail "exit $st: $(cat err)"
	assert_regex "$(cat err)" 'lock lost: .*the command goes on \(--on-lost ignore\)'
}

@test "lock still ours at release: the command's status, nothing on stderr" {
	run -3 --separate-stderr rlock -t 60s -k mine -- sh -c 'exit 3'
	assert_equal "$stderr" ""
	key_absent 'rlock:{mine}'
}

# A loopback proxy to the test server that, once BLACKHOLE exists, silently drops the
# FIRST connection it accepted (rlock's main connection): no reply, no FIN, no RST, as
# a NAT that forgot an idle flow. Later connections are forwarded normally.
# shellcheck disable=SC2016
_IDLE_DROP_PROXY='
use strict; use warnings; use IO::Socket::INET; use IO::Select;
my ($lport, $uport, $trigger, $ready) = @ARGV;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $lport, Listen => 16,
	ReuseAddr => 1) or die "listen: $!";
my $sel = IO::Select->new($l); my (%peer, %first); my $n = 0;
open my $r, ">", $ready or die; print $r "$$\n"; close $r;
my $stop = time + 120;
while (time < $stop) {
	for my $h ($sel->can_read(0.05)) {
		if ($h == $l) {
			my $c = $l->accept or next;
			my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $uport)
				or do { close $c; next };
			$peer{$c} = $u; $peer{$u} = $c; $sel->add($c, $u);
			if (++$n == 1) { $first{$c} = 1; $first{$u} = 1; }
			next;
		}
		my $got = sysread($h, my $buf, 65536);
		if (!$got) { my $o = $peer{$h}; $sel->remove($h, $o); close $h; close $o; next; }
		next if $first{$h} && -e $trigger; # black hole: swallow, never answer
		syswrite($peer{$h}, $buf);
	}
}
'

@test "release does not use the main connection that sat idle (silently dropped): released at once" {
	local port
	port=$(free_port)
	perl -e "$_IDLE_DROP_PROXY" "$port" "$REDIS_PORT" "$PWD/blackhole" "$PWD/proxy.ready" \
		</dev/null >proxy.log 2>&1 3>&- 4>&- &
	track_pid $!
	wait_until 10 test -s proxy.ready
	rlock_bg -u "redis://127.0.0.1:$port" --io-timeout 3s -t 6s -k idle -- "$HOLD" idle
	wait_until 10 test -e idle.started
	wait_until 10 renewal_connected
	# TCP keepalive on rlock's sockets (a dropped flow is noticed on its own too)
	wait_until 5 eval "ss -tnoH state established '( dport = :$port )' | grep -q keepalive" ||
		fail "no TCP keepalive on rlock's connections: $(ss -tnoH state established "( dport = :$port )")"
	touch blackhole
	local t0 t1
	t0=$(now_ms)
	touch idle.release
	rlock_wait "$RLOCK_PID" 20
	t1=$(now_ms)
	assert_equal "$RLOCK_STATUS" 0
	echo "# command end → rlock exit with the main connection black-holed: $((t1 - t0)) ms (io-timeout 3s)" >&3
	key_absent 'rlock:{idle}' || fail "lock still held after rlock exited: $(cat "$RLOCK_ERR")"
	[[ ! -s $RLOCK_ERR ]] || fail "stderr: $(cat "$RLOCK_ERR")"
}
