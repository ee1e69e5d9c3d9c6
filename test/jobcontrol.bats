#!/usr/bin/env bats
# Job control in an interactive bash on a real pty (script(1)): Ctrl-Z then `bg` leaves
# the shell alive and the job running (rlock must not take the terminal back when
# continued in the background); one Ctrl-C ends a loop of rlock runs (rlock dies of
# the command's SIGINT, so bash knows the user interrupted).

# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: typed into the shell; bats sets $stderr; a test sets REDIS_URL for itself
load helpers

setup() {
	common_setup
	mkfifo tty-in
	# An interactive bash on a pty, its input from the FIFO (fd 5 of the test).
	(clean_exec script -qfec "bash --norc --noprofile -i" /dev/null) <tty-in >tty-out 2>&1 &
	SHELL_PID=$!
	track_pid "$SHELL_PID"
	exec 5>tty-in
	printf 'PS1="$ "\n' >&5
}

teardown() {
	exec 5>&- || true
	# a replica a test started: stopped (resumed first) even when the test fails
	[[ -z ${REPLICA_PID:-} ]] || redis_stop "$REPLICA_PID"
	common_teardown
}

# cmd_pid KEY: the pid of the command (comm sleep) run by the holder of KEY.
cmd_pid() {
	local rpid
	rpid=$(rcli HGET "rlock:{$1}:owner" pid)
	[[ -n $rpid ]] || return 1
	ps -o pid=,comm= --ppid "$rpid" 2>/dev/null | awk '$2 == "sleep" {print $1}'
}

# foreground KEY: the holder's command owns the terminal.
foreground() {
	local c
	c=$(cmd_pid "$1")
	[[ -n $c ]] || return 1
	[[ $(ps -o tpgid= -p "$c" | tr -d ' ') == "$(ps -o pgid= -p "$c" | tr -d ' ')" ]]
}

# state PID: the process state letter (R, S, T, ...).
state() { ps -o stat= -p "$1" | cut -c1; }

running() { [[ $(state "$1") != T ]]; }

@test "Ctrl-Z then bg: the shell stays alive and the job runs on in the background" {
	printf '%s\n' "$RLOCK -u $REDIS_URL -k bgz -- sleep 300" >&5
	wait_until 30 key_exists 'rlock:{bgz}'
	wait_until 30 foreground bgz
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{bgz}:owner' pid)
	cpid=$(cmd_pid bgz)
	track_pid "$rpid" "$cpid"
	printf '\032' >&5 # Ctrl-Z
	wait_until 30 grep -q Stopped tty-out
	wait_until 30 not running "$cpid"
	printf 'bg\n' >&5
	wait_until 30 running "$cpid"
	wait_until 30 running "$rpid"
	printf 'echo alive > alive\n' >&5
	wait_until 30 test -e alive || fail "the shell did not survive bg: $(cat -v tty-out)"
	proc_alive "$SHELL_PID" || fail "the shell exited"
	key_exists 'rlock:{bgz}'
	# and it is a normal background job: kill %1 ends it, the lock is released
	printf 'kill %%1\n' >&5
	wait_until 30 key_absent 'rlock:{bgz}'
	wait_until 30 proc_gone "$rpid"
	printf 'echo still-here > still\n' >&5
	wait_until 30 test -e still
}

@test "one Ctrl-C ends a loop of rlock runs (rlock dies of the command's SIGINT)" {
	printf '%s\n' "for i in 1 2 3; do $RLOCK -u $REDIS_URL -k loop -- sleep 20; echo iter\$i >> iters; done" >&5
	wait_until 30 key_exists 'rlock:{loop}'
	wait_until 30 foreground loop
	printf '\003' >&5 # Ctrl-C
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after || fail "the loop went on after Ctrl-C: $(cat -v tty-out)"
	[[ ! -e iters ]] || fail "the loop body went on after Ctrl-C: $(cat iters)"
	assert_equal "$(cat after)" "status=130"
	key_absent 'rlock:{loop}'
}

# make_hb_beat: ./beat, a command that writes one line per 20 ms into hb while it runs
make_hb_beat() {
	cat >beat <<'PL'
#!/usr/bin/perl
# one line per 20 ms into hb while running
open my $f, '>>', 'hb' or die; $f->autoflush(1);
while (1) { print $f time, "\n"; select undef, undef, undef, 0.02; }
PL
	chmod +x beat
}

@test "Ctrl-Z past the lease, then fg: the command is stopped for good, never resumed; exit 79" {
	make_hb_beat
	printf '%s\n' "$RLOCK -u $REDIS_URL -t 1s -k stale -- ./beat" >&5
	wait_until 30 file_has_lines hb 3
	printf '\032' >&5 # Ctrl-Z
	wait_until 30 grep -q Stopped tty-out
	wait_until 30 key_absent 'rlock:{stale}' # the lease has ended on the server
	local before
	before=$(wc -l <hb)
	printf 'fg\n' >&5
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after # written, not only created (the shell opens it first)
	assert_equal "$(cat after)" "status=79"
	assert_equal "$(wc -l <hb)" "$before" # not one more beat after the lease ran out
}

@test "a background rlock whose command reads the terminal stops as a job does (tty input); fg gives it the terminal" {
	cat >ttyread.sh <<'SH'
#!/bin/sh
: >prompted
read -r x </dev/tty
echo "hello $x" >answer
SH
	chmod +x ttyread.sh
	printf '%s\n' "$RLOCK -u $REDIS_URL -k bgtty -- ./ttyread.sh &" >&5
	wait_until 30 test -e prompted
	local rpid
	rpid=$(rcli HGET 'rlock:{bgtty}:owner' pid)
	[[ -n $rpid ]] || fail "no holder"
	track_pid "$rpid"
	# as `./ttyread.sh &` alone: the shell reports the job stopped for terminal input
	wait_until 30 not running "$rpid" || fail "rlock runs on while its command waits for the terminal: $(cat -v tty-out)"
	printf 'jobs -l\n' >&5
	wait_until 30 grep -q 'Stopped.*tty input' tty-out || fail "$(cat -v tty-out)"
	printf 'fg\n' >&5
	wait_until 30 running "$rpid"
	printf 'bob\n' >&5
	wait_until 30 test -s answer
	wait_until 30 key_absent 'rlock:{bgtty}'
	printf 'echo rlock-exit=$? > exitcode\n' >&5 # $? of fg: the job's status
	wait_until 30 test -s exitcode
	assert_equal "$(cat answer)" "hello bob"
	assert_equal "$(cat exitcode)" "rlock-exit=0"
}

@test "a background rlock whose command someone stops (kill -STOP) renews on: not a job's stop, the lock kept" {
	printf '%s\n' "$RLOCK -u $REDIS_URL -t 1s -k pause -- sleep 300 >/dev/null 2>&1 &" >&5
	wait_until 30 key_exists 'rlock:{pause}'
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{pause}:owner' pid)
	wait_until 30 eval '[[ -n $(cmd_pid pause) ]]' # asked again on each poll: the command may not have exec'd yet
	cpid=$(cmd_pid pause)
	track_pid "$rpid" "$cpid"
	kill -STOP "$cpid"
	wait_until 30 not running "$cpid"
	# three leases long: rlock neither stops with it nor loses the lock
	run ! wait_until 3 not running "$rpid"
	key_exists 'rlock:{pause}'
	kill -CONT "$cpid"
	printf 'kill %%1\n' >&5
	wait_until 30 key_absent 'rlock:{pause}'
	wait_until 30 proc_gone "$rpid"
}

@test "Ctrl-Z with stdin not the terminal (rlock's group in the foreground): the command stops with rlock; fg resumes it, the lock kept" {
	make_hb_beat
	printf '%s\n' "$RLOCK -u $REDIS_URL -k zin -- ./beat </dev/null" >&5
	wait_until 30 file_has_lines hb 3
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{zin}:owner' pid)
	[[ -n $rpid ]] || fail "no holder"
	cpid=$(ps -o pid=,comm= --ppid "$rpid" | awk '$2 == "beat" {print $1}')
	[[ -n $cpid ]] || fail "no command"
	track_pid "$rpid" "$cpid"
	printf '\032' >&5 # Ctrl-Z: to rlock's group, the terminal's foreground group
	wait_until 30 grep -q Stopped tty-out
	wait_until 30 not running "$rpid"
	# the job is stopped, all of it: as flock's command would be
	wait_until 30 not running "$cpid" || fail "the command runs on while the shell says the job is stopped: $(cat -v tty-out)"
	run ! grep -q 'Stopped (signal)' tty-out # a job's stop (SIGTSTP), as the shell says it
	local before
	before=$(wc -l <hb)
	printf 'fg\n' >&5
	wait_until 30 running "$cpid"
	wait_until 30 file_has_lines hb $((before + 3))
	key_exists 'rlock:{zin}'
	printf '\003' >&5 # Ctrl-C: to rlock's group again, forwarded once
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after
	assert_equal "$(cat after)" "status=130"
	key_absent 'rlock:{zin}'
}

# ctrl_z_then_fg NAME RLOCK_PID COMMAND_PID: Ctrl-Z to the command's group (it has the
# terminal): the command and rlock stop, the shell gets control back (it runs a line);
# then fg: the command runs again, in the foreground.
ctrl_z_then_fg() {
	printf '\032' >&5
	wait_until 30 not running "$3"
	wait_until 30 grep -q Stopped tty-out || fail "the shell did not get control back: $(cat -v tty-out)"
	wait_until 30 not running "$2"
	printf 'echo alive > alive\n' >&5
	wait_until 30 test -e alive || fail "the shell is not in control: $(cat -v tty-out)"
	printf 'fg\n' >&5
	wait_until 30 running "$3"
	wait_until 30 foreground "$1"
}

@test "Ctrl-Z of an rlock inside a script (its parent in its own group): the whole job stops, the shell gets control back; fg resumes it" {
	cat >job.sh <<SH
#!/bin/sh
$RLOCK -u $REDIS_URL -k inscript -- sleep 300
echo "after \$?" > after
SH
	chmod +x job.sh
	printf '%s\n' "./job.sh" >&5
	wait_until 30 key_exists 'rlock:{inscript}'
	wait_until 30 foreground inscript
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{inscript}:owner' pid)
	cpid=$(cmd_pid inscript)
	track_pid "$rpid" "$cpid"
	ctrl_z_then_fg inscript "$rpid" "$cpid"
	key_exists 'rlock:{inscript}'
	printf '\003' >&5 # Ctrl-C: the command dies of it, so does rlock, the script goes on
	wait_until 30 test -s after
	assert_equal "$(cat after)" "after 130"
	key_absent 'rlock:{inscript}'
}

@test "Ctrl-Z of rlock piped into another command (rlock ... | cat): the whole pipeline stops, the shell gets control back" {
	printf '%s\n' "$RLOCK -u $REDIS_URL -k piped -- sleep 300 | cat" >&5
	wait_until 30 key_exists 'rlock:{piped}'
	wait_until 30 foreground piped
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{piped}:owner' pid)
	cpid=$(cmd_pid piped)
	track_pid "$rpid" "$cpid"
	ctrl_z_then_fg piped "$rpid" "$cpid"
	printf '\003' >&5 # the command dies of it, so does rlock; cat sees its end
	printf 'echo done > after\n' >&5
	wait_until 30 test -s after
	wait_until 30 proc_gone "$rpid"
	key_absent 'rlock:{piped}'
}

@test "Ctrl-Z of a nested rlock's command (re-entered, in a script under the holder): every level stops, the shell gets control back; fg resumes it" {
	cat >inner.sh <<SH
#!/bin/sh
$RLOCK -u $REDIS_URL -k nest -- sleep 300
echo "inner \$?" > after
SH
	chmod +x inner.sh
	printf '%s\n' "$RLOCK -u $REDIS_URL -k nest -- ./inner.sh" >&5
	# the inner rlock's command: the sleep whose parent runs `-k nest -- sleep 300`
	inner_cmd() { pgrep -x sleep -P "$(pgrep -d, -f -- '-k nest -- sleep 300')"; }
	wait_until 30 inner_cmd
	local cpid
	cpid=$(inner_cmd)
	track_pid "$cpid"
	wait_until 30 eval '[[ $(ps -o tpgid= -p "$cpid" | tr -d " ") == "$(ps -o pgid= -p "$cpid" | tr -d " ")" ]]'
	printf '\032' >&5
	wait_until 30 not running "$cpid"
	wait_until 30 grep -q Stopped tty-out || fail "the shell did not get control back: $(cat -v tty-out)"
	printf 'echo alive > alive\n' >&5
	wait_until 30 test -e alive || fail "the shell is not in control: $(cat -v tty-out)"
	printf 'fg\n' >&5
	wait_until 30 running "$cpid"
	printf '\003' >&5
	wait_until 30 test -s after
	assert_equal "$(cat after)" "inner 130"
	wait_until 30 key_absent 'rlock:{nest}'
}

# past MS: the clock (now_ms) is at MS or later.
past() { (($(now_ms) >= $1)); }

# stopped_or_gone PID: the job's rlock (PID) stopped (the shell said so) or exited.
stopped_or_gone() { grep -q Stopped tty-out || proc_gone "$1"; }

@test "Ctrl-Z after the command ended (a renewal's reply on its way, then the release's): rlock stops only once it released; fg past the lease: the command's status" {
	# rlock stopped mid-release (in the renewal thread's join, before the release was
	# sent) gave nothing back: continued past the lease, it found it over and left the
	# lock to expire by its TTL, recorded lost. The release comes first now, then the
	# job's stop, as with any job that gets Ctrl-Z while it exits.
	local t0 cmd rl
	# the scripts loaded (a renewal among them): one round trip each
	"$RLOCK" -u "$REDIS_URL" -t 300ms -k rz -- sleep 0.25
	# replies 1.5 s late, ttl 4.4 s: the first renewal is due (1.47 s) before the grant's
	# reply comes, so it is on its way (until 3 s) when the command ends 0.3 s later; the
	# release after it is answered at 4.5 s, inside the lease it renewed (5.9 s)
	delay_proxy_start 1500
	t0=$(now_ms)
	printf '%s\n' "$RLOCK -u $PROXY_URL -t 4400ms -k rz -- sh -c 'echo \$\$ \$PPID > pids; sleep 0.3'" >&5
	wait_until 30 test -s pids
	read -r cmd rl <pids
	track_pid "$rl"
	wait_until 30 proc_gone "$cmd" # the command ended (a Ctrl-Z now is not its stop)
	printf '\032' >&5 # Ctrl-Z: the renewal's reply, then the release's, are on their way
	echo "# Ctrl-Z at $(($(now_ms) - t0)) ms" >&3
	wait_until 30 stopped_or_gone "$rl"
	echo "# stopped (or gone: a stop that came as rlock reaped) at $(($(now_ms) - t0)) ms" >&3
	key_absent 'rlock:{rz}' # released before it stopped: not left to its TTL
	if grep -q Stopped tty-out; then
		wait_until 30 past $((t0 + 8000)) # the lease over, surely
		printf 'fg\n' >&5
	fi
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after
	assert_equal "$(cat after)" "status=0"
	[[ $("$RLOCK" -u "$REDIS_URL" -k rz --history) == *released* ]]
	[[ $("$RLOCK" -u "$REDIS_URL" -k rz --history) != *lost* ]]
}

@test "Ctrl-Z during the release's --wait-replicas WAIT (the release sent): rlock stops at once, not when the WAIT ends; fg: it waits on, one line says not confirmed, the command's status" {
	# The replica is stopped: the WAIT can only end by its deadline (--io-timeout 3s).
	local replica rpid master=$REDIS_PORT url=$REDIS_URL t0 rl
	# its first sync at once, not after the default 5 s of diskless-sync delay
	rcli CONFIG SET repl-diskless-sync-delay 0 >/dev/null
	redis_start --replicaof 127.0.0.1 "$master"
	replica=$REDIS_PORT rpid=$REDIS_PID REPLICA_PID=$REDIS_PID
	REDIS_PORT=$master REDIS_URL=$url
	wait_until 20 sh -c "redis-cli -p $replica info replication | grep -q master_link_status:up"
	printf '%s\n' "$RLOCK -u $REDIS_URL --wait-replicas 1 --io-timeout 3s -k rw -- sh -c 'echo \$PPID > rl.pid; kill -STOP $rpid' 2>rl.err" >&5
	wait_until 30 test -s rl.pid
	rl=$(cat rl.pid)
	track_pid "$rl"
	wait_until 30 key_absent 'rlock:{rw}' # released on the master: the WAIT is on
	t0=$(now_ms)
	printf '\032' >&5
	wait_until 30 grep -q Stopped tty-out
	echo "# stopped $(($(now_ms) - t0)) ms after Ctrl-Z" >&3
	(($(now_ms) - t0 < 1500)) || fail "rlock stopped only when the WAIT ended"
	printf 'fg\n' >&5
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after
	assert_equal "$(cat after)" "status=0"
	echo "# $(cat rl.err)" >&3
	assert_equal "$(grep -c . rl.err)" 1
	grep -q 'released rlock:{rw} on the master, not confirmed by 1 replica(s)' rl.err
}

@test "Ctrl-Z after the command exited, its group's last process still running (it has the terminal): the job stops, rlock with it, the shell gets control back; fg resumes it, the command's status" {
	# The Ctrl-Z goes to the command's group, which has the terminal: its leftover
	# (sleep) stopped while rlock waited for the group on, the shell never got control
	# back, and the lease was renewed under a job nobody could resume but by kill -CONT.
	local cmd rl left
	printf '%s\n' "$RLOCK -u $REDIS_URL -k zd -- sh -c 'echo \$\$ \$PPID > pids; sleep 1 & echo \$! > left; exit 3'" >&5
	wait_until 30 test -s left
	read -r cmd rl <pids
	left=$(cat left)
	track_pid "$rl" "$left"
	wait_until 30 proc_gone "$cmd"
	printf '\032' >&5
	wait_until 30 not running "$left"
	wait_until 5 grep -q Stopped tty-out || fail "the shell did not get control back: $(cat -v tty-out)"
	wait_until 5 not running "$rl"
	key_exists 'rlock:{zd}'
	printf 'fg\n' >&5
	printf 'echo status=$? > after\n' >&5
	wait_until 30 test -s after
	assert_equal "$(cat after)" "status=3"
	key_absent 'rlock:{zd}'
}

# make_handoff: ./handoff hands the terminal to a child it puts in a group of its own
# (sleep 300), as a job-control shell gives it to its foreground job, writes "its pid,
# rlock's, the child's" to pids, and exits 3.
make_handoff() {
	cat >handoff <<'PL'
#!/usr/bin/perl
use POSIX qw(setpgid tcsetpgrp);
$SIG{TTOU} = 'IGNORE';
my $pid = fork // die "fork: $!";
if (!$pid) { setpgid(0, 0); exec 'sleep', '300'; exit 127 }
setpgid($pid, $pid); # whichever of the two comes first
open my $tty, '+<', '/dev/tty' or die "/dev/tty: $!";
select undef, undef, undef, 0.01 until getpgrp($pid) == $pid;
tcsetpgrp(fileno($tty), $pid) or die "tcsetpgrp: $!";
open my $f, '>', 'pids' or die; print $f "$$ ", getppid(), " $pid\n"; close $f;
exit 3;
PL
	chmod +x handoff
}

# handoff_stopped KEY HOW: ./handoff under rlock -k KEY, the command gone and its child
# group holding the terminal; stopped by HOW (ctrl-z: typed; tstp: kill -TSTP of rlock):
# that group stops, rlock with it, the shell gets control back; fg continues both and
# the job ends with the command's status (3), the lock released.
handoff_stopped() {
	local key=$1 how=$2 cmd rl left
	make_handoff
	printf '%s\n' "$RLOCK -u $REDIS_URL -k $key -- ./handoff" >&5
	wait_until 30 test -s pids
	read -r cmd rl left <pids
	track_pid "$rl" "$left"
	wait_until 30 proc_gone "$cmd"
	if [[ $how == ctrl-z ]]; then printf '\032' >&5; else kill -TSTP "$rl"; fi
	wait_until 30 not running "$left"
	wait_until 30 grep -q Stopped tty-out || fail "the shell did not get control back: $(cat -v tty-out)"
	wait_until 30 not running "$rl"
	key_exists "rlock:{$key}"
	printf 'fg\n' >&5
	printf 'echo status=$? > after\n' >&5
	wait_until 30 running "$left"
	wait_until 30 eval '[[ $(ps -o tpgid= -p "$left" | tr -d " ") == "$left" ]]'
	kill -TERM "$left"
	wait_until 30 test -s after
	assert_equal "$(cat after)" "status=3"
	key_absent "rlock:{$key}"
}

@test "Ctrl-Z after the command exited, a group of its cover holding the terminal (its job-control parent gone): the job stops, rlock with it, the shell gets control back; fg gives that group the terminal again" {
	# The command hands the terminal to a child it put in a group of its own, as a
	# job-control shell gives it to its foreground job, and exits. The Ctrl-Z stopped
	# that child (rlock's now) while rlock waited on for it: the shell never got control
	# back, and nothing but a kill -CONT from elsewhere could resume the job.
	handoff_stopped zh ctrl-z
}

@test "kill -TSTP of rlock after the command exited, a group of its cover holding the terminal: that group stops too, rlock with it; fg continues both" {
	handoff_stopped zk tstp
}
