#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the shells the tests start; bats sets $stderr
# --warn SIGNAL: when a renewal is a third of the ttl late, the command's group gets
# SIGNAL once, before the loss action (whose deadline is unchanged); a confirmed
# renewal re-arms it. The command finds the signal in RLOCK_WARN_SIGNAL.

bats_require_minimum_version 1.5.0
load helpers

# The command: records the signal it expects, the time of the warning and of SIGTERM.
JOB='trap "date +%s%3N >warn.ms" USR1
trap "date +%s%3N >term.ms; exit 0" TERM
echo "$RLOCK_WARN_SIGNAL" >sig
touch started
while [ ! -e go ]; do sleep 0.02; done'

@test "warn: a frozen server: the command hears the warning before its SIGTERM" {
	rlock_bg -k w -t 3s --warn USR1 -c "$JOB"
	wait_until 10 test -e started
	[[ $(cat sig) == USR1 ]]
	kill -STOP "$REDIS_PID"
	wait_until 30 test -s term.ms
	kill -CONT "$REDIS_PID"
	rlock_wait
	((RLOCK_STATUS == 79))
	[[ -s warn.ms ]] || fail "no warning before SIGTERM: $(cat "$RLOCK_ERR")"
	echo "# warning $(($(cat term.ms) - $(cat warn.ms))) ms before SIGTERM (ttl 3 s)" >&3
	(($(cat warn.ms) <= $(cat term.ms)))
	[[ $(grep -c -- '--warn' "$RLOCK_ERR") == 1 ]] # once
}

@test "warn: renewals in time: no warning" {
	rlock_bg -k w -t 3s --warn USR1 -c "$JOB"
	wait_until 10 test -e started
	renewed_reset
	wait_until 30 renewed 3 'rlock:{w}' rcli
	touch go
	rlock_wait
	((RLOCK_STATUS == 0))
	[[ ! -e warn.ms ]]
	not grep -q -- '--warn' "$RLOCK_ERR"
}

@test "warn: from the config file (warn = USR2); bad values are a usage error (64)" {
	printf 'warn = USR2\n' >conf
	run -0 "$RLOCK" --config conf -k c -- sh -c 'echo "$RLOCK_WARN_SIGNAL"'
	[[ $output == USR2 ]]
	run -0 "$RLOCK" -k c -- sh -c 'echo "${RLOCK_WARN_SIGNAL-unset}"'
	[[ $output == unset ]]
	run -64 --separate-stderr "$RLOCK" --warn KILL -k c -- true
	assert_one_line_error
	run -64 --separate-stderr "$RLOCK" --warn bogus -k c -- true
	assert_one_line_error
}

# freeze_until_warned N FILE PATTERN KEY: stop the server until FILE has N lines matching
# PATTERN (a warning), then resume it and wait until a renewal moves KEY's PTTL up.
lines_at_least() {
	local c
	c=$(grep -c -- "$3" "$2" 2>/dev/null) || true
	((${c:-0} >= $1))
}
freeze_until_warned() {
	kill -STOP "$REDIS_PID"
	wait_until 30 lines_at_least "$1" "$2" "$3" || {
		kill -CONT "$REDIS_PID"
		return 1
	}
	kill -CONT "$REDIS_PID"
	renewed_reset
	wait_until 30 renewed 1 "$4" rcli
}

@test "warn: re-armed by a confirmed renewal: a second freeze, a second warning" {
	# ttl 12 s: the warning at 8 s, the loss at 9.6 s: the server resumes in between
	rlock_bg -k w -t 12s --warn USR1 -c 'trap "date +%s%3N >>warn.ms" USR1
touch started
while [ ! -e go ]; do sleep 0.02; done'
	wait_until 10 test -e started
	freeze_until_warned 1 warn.ms . 'rlock:{w}'
	freeze_until_warned 2 warn.ms . 'rlock:{w}'
	touch go
	rlock_wait
	((RLOCK_STATUS == 0))
	[[ $(grep -c -- '--warn' "$RLOCK_ERR") == 2 ]]
}

@test "warn: an --acquire keeper logs the warning (its log file), once per danger, re-armed by a renewal" {
	eval "$("$RLOCK" -k kw -t 12s --warn USR1 --acquire --log-file "$PWD/k.log")"
	track_pid "$(rcli HGET 'rlock:{kw}:owner' pid)"
	freeze_until_warned 1 k.log '--warn' 'rlock:{kw}'
	freeze_until_warned 2 k.log '--warn' 'rlock:{kw}'
	[[ $(grep -c -- '--warn' k.log) == 2 ]]
	grep -- '--warn' k.log | head -1 >&3
	run -0 "$RLOCK" -k kw --release --token "$RLOCK_TOKEN"
}


@test "warn: rlock's stderr a full pipe nobody reads: the --warn line (nor --events -) does not hold up the loss's SIGTERM (nor the lost line, the release, the exit)" {
	# The command shares rlock's stderr (as under cron or a CI step) and fills it; a
	# write(2) of the warning blocked the supervisor until someone read: the loss's
	# SIGTERM never came (the watchdog's SIGKILL at 9/10 of the ttl did). The command's
	# shell itself writes elsewhere (dash says so when its sleep dies of SIGUSR1).
	local pid st=0
	mkfifo errpipe
	# fd 8 reads it (unread until the end), fd 9 writes it: opened through fd 7 (read
	# and write: no open blocks on the FIFO), then 7 closed
	# shellcheck disable=SC2094 # one FIFO, its two ends
	exec 7<>errpipe 8<errpipe 9>errpipe 7<&-
	(clean_exec "$RLOCK" -u "$REDIS_URL" -k wf -t 3s --warn USR1 --events - \
		-c "head -c 200000 /dev/zero >&2 & exec 2>job.err; $JOB") </dev/null >out 2>&9 &
	pid=$!
	track_pid "$pid"
	exec 9>&-
	wait_until 10 test -e started
	wait_until 10 sh -c '[ "$(perl -e "$1" 8)" -ge 60000 ]' _ \
		'open my $f, "<&=", $ARGV[0] or die; my $n = pack "L", 0; ioctl($f, 0x541B, $n) or die; print unpack "L", $n'
	kill -STOP "$REDIS_PID"
	wait_until 30 test -s term.ms || st=1
	kill -CONT "$REDIS_PID"
	[[ -s warn.ms ]] || st=2
	# now someone reads: rlock says what it could not write, and ends
	timeout 20 cat <&8 | tr -d '\0' >err.txt
	exec 8<&-
	rlock_wait "$pid"
	cat err.txt
	((st == 0)) || fail "no SIGTERM ($st) while the warning waited for the full pipe"
	((RLOCK_STATUS == 79))
	grep -q -- '--warn' err.txt
	grep -q 'lock lost' err.txt
	# --events -: its lines on the same stderr, in order with rlock's, none blocking
	grep -q '"event":"warned"' err.txt
	grep -q '"event":"lost"' err.txt
	key_absent 'rlock:{wf}'
}

@test "rlock's stderr a full pipe nobody reads, its lines waiting at the end: SIGTERM still ends it at once (the lock released first), dying of it" {
	# Signals are blocked in rlock (read from a signalfd): a write(2) to a pipe nobody
	# reads made it deaf to them for good, after the release as well.
	local pid
	mkfifo errpipe
	# shellcheck disable=SC2094 # one FIFO, its two ends (as above)
	exec 7<>errpipe 8<errpipe 9>errpipe 7<&-
	# the command fills the pipe (non-blocking, then blocking again, as it found it) and
	# ends; rlock's -v line of the release then waits
	(clean_exec "$RLOCK" -v -u "$REDIS_URL" -k fe -- perl -e '
		use Fcntl; my $f = fcntl(STDERR, F_GETFL, 0);
		fcntl(STDERR, F_SETFL, $f | O_NONBLOCK);
		1 while syswrite(STDERR, "x" x 4096); 1 while syswrite(STDERR, "x");
		fcntl(STDERR, F_SETFL, $f); open my $d, ">", "filled"; close $d') </dev/null >out 2>&9 &
	pid=$!
	track_pid "$pid"
	exec 9>&-
	wait_until 20 test -e filled
	wait_until 20 key_absent 'rlock:{fe}' # released
	proc_alive "$pid" # and waiting for the pipe
	kill -TERM "$pid"
	rlock_wait "$pid" 5 || fail "SIGTERM did not end an rlock whose stderr is full"
	exec 8<&-
	assert_equal "$RLOCK_STATUS" 143
}
