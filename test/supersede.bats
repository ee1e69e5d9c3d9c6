#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# --supersede (issue 28; GitLab's newest_first, GitHub's pending run): on a name at
# most one --supersede request waits; a newer one takes its place
# (PREFIX{NAME}:supersede) and wakes it through its wake list or channel, so it leaves
# at once with one line naming the newer request and exit 80 (--superseded-exit-code).
# The running holder is untouched. Times of a replacement come from the server's clock
# (the history entry's id); the exits from a wrapper's `date`.

load helpers

setup() {
	common_setup
	printf 'history = 50\n' >conf
	export RLOCK_CONFIG=$BATS_TEST_TMPDIR/conf
	: >log
}

# place_is LABEL: the waiting --supersede request is the one labelled LABEL.
place_is() { [[ $(rcli HGET 'rlock:{dep}:supersede' label) == "$1" ]]; }
# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }
queued_one() { [[ $(rcli ZCARD 'rlock:{dep}:queue') == 1 ]]; }

# mute_proxy_start: a loopback proxy to the test server that drops every reply while
# the file mute exists (the server acts; the client never hears of it, its connection
# open: a path that loses replies). Exports PROXY_URL.
mute_proxy_start() {
	local port ready=$BATS_TEST_TMPDIR/mute.ready
	port=$(free_port) || return 1
	# shellcheck disable=SC2016  # Perl's own $
	perl -e '
use strict; use warnings; use IO::Socket::INET; use IO::Select;
my ($lport, $uport, $ready, $mute) = @ARGV;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $lport, Listen => 64,
	ReuseAddr => 1) or die "listen: $!";
my $sel = IO::Select->new($l); my (%peer, %up);
open my $r, ">", $ready or die; print $r "$$\n"; close $r;
for (;;) {
	for my $h ($sel->can_read(1)) {
		if ($h == $l) {
			my $c = $l->accept or next;
			my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $uport)
				or do { close $c; next };
			$peer{$c} = $u; $peer{$u} = $c; $up{$u} = 1; $sel->add($c, $u); next;
		}
		my $o = $peer{$h} or next;
		my $n = sysread($h, my $buf, 65536);
		if (!$n) { $sel->remove($h, $o); close $h; close $o; delete @peer{$h, $o}; next; }
		next if $up{$h} && -e $mute;
		syswrite($o, $buf);
	}
}' "$port" "$REDIS_PORT" "$ready" "$BATS_TEST_TMPDIR/mute" </dev/null >/dev/null 2>&1 3>&- 4>&- &
	local pid=$!
	disown "$pid" # no "Killed" job message when teardown stops it
	track_pid "$pid"
	wait_until 10 test -s "$ready"
	export PROXY_URL="redis://127.0.0.1:$port"
}

# request I [ARGS...]: a --supersede request labelled reqI in the background, whose
# command logs "run I"; its wrapper writes "STATUS EXIT_MS" to exit.I when rlock ends.
request() {
	local i=$1
	shift
	(clean_exec sh -c '"$0" "$@"; echo "$? $(date +%s%3N)" >exit.'"$i" "$RLOCK" \
		-k dep --supersede --label "req$i" "$@" -c "echo run $i >>log") \
		</dev/null >"out.$i" 2>"err.$i" &
	track_pid $!
}

# superseded_at LABEL: the server's time (ms) of the entry that replaced LABEL.
superseded_at() {
	rcli XRANGE 'rlock:{dep}:history' - + | awk -v l="$1" '
		/^[0-9]+-[0-9]+$/ { id = $0; ev = "" }
		prev == "ev" { ev = $0 }
		prev == "label" && ev == "superseded" && $0 == l { split(id, p, "-"); print p[1]; exit }
		{ prev = $0 }'
}

@test "four --supersede requests while the holder runs: only the holder and the last run; each replaced one exits 80 within a second" {
	rlock_bg -k dep --label holder -- "$HOLD" h
	local h_pid=$RLOCK_PID i
	wait_until 30 test -e h.started
	for i in 1 2 3 4; do
		request "$i"
		wait_until 30 place_is "req$i"
		# 0.3 s apart at least (the issue's pace), never before the place is taken
		sleep 0.3
	done
	for i in 1 2 3; do
		wait_until 30 test -s "exit.$i"
		read -r st at <"exit.$i"
		assert_equal "$st" 80
		grep -q "superseded by a newer --supersede request (.* pid [0-9]* \[req$((i + 1))\])" "err.$i" ||
			fail "no line naming req$((i + 1)): $(cat "err.$i")"
		[[ $(wc -l <"err.$i") == 1 ]] || fail "more than one line: $(cat "err.$i")"
		local replaced
		replaced=$(superseded_at "req$i")
		[[ -n $replaced ]] || fail "no history entry for req$i"
		echo "# req$i left $((at - replaced)) ms after it was replaced" >&3
		((at - replaced <= 1500)) || fail "req$i left $((at - replaced)) ms after it was replaced"
	done
	# the holder ran on, untouched
	proc_alive "$h_pid"
	[[ ! -s exit.4 ]]
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -s exit.4
	read -r st at <exit.4
	assert_equal "$st" 0
	assert_equal "$(cat log)" "run 4"
	assert_equal "$(rcli GET 'rlock:{dep}:fence')" 2
	assert_equal "$(rcli EXISTS 'rlock:{dep}:supersede')" 0
}

@test "--superseded-exit-code 0: a superseded CI job passes, its command never ran" {
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	request 1 --superseded-exit-code 0
	wait_until 30 place_is req1
	request 2
	wait_until 30 test -s exit.1
	read -r st _ <exit.1
	assert_equal "$st" 0
	grep -q 'superseded by a newer --supersede request' err.1
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 test -s exit.2
	assert_equal "$(cat log)" "run 2"
}

@test "--supersede with -w: the budget still bounds the wait (75); a replaced one within it exits 80" {
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	request 1 -w 1s
	wait_until 30 test -s exit.1
	read -r st _ <exit.1
	assert_equal "$st" 75
	# it left its place
	assert_equal "$(rcli EXISTS 'rlock:{dep}:supersede')" 0
	request 2 -w 60s
	wait_until 30 place_is req2
	request 3 -w 60s
	wait_until 30 test -s exit.2
	read -r st _ <exit.2
	assert_equal "$st" 80
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 test -s exit.3
	assert_equal "$(cat log)" "run 3"
}

@test "--supersede with -w: replaced within its budget but told only after its deadline (stopped meanwhile): 80, not 75" {
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	local t0
	t0=$(now_ms)
	rlock_bg -vv -k dep --supersede --label req1 -w 3s -c 'echo run 1 >>log'
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$a_err"
	kill -STOP "$a" # away: it learns nothing until its -w deadline has passed
	request 2 -w 60s
	wait_until 30 place_is req2
	wait_until 30 past $((t0 + 4000))
	kill -CONT "$a"
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 80
	grep -q 'superseded by a newer --supersede request' "$a_err" || fail "$(cat "$a_err")"
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 test -s exit.2
	assert_equal "$(cat log)" "run 2"
}

@test "--supersede: a newer request that finds the lock free before the waiting one took it replaces that one (80): the older never runs after the newer" {
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -vv -k dep --supersede --label req1 -w 60s -c 'echo run 1 >>log'
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$a_err"
	kill -STOP "$a" # slow to take the lock once it is free
	touch h.release
	rlock_wait "$h_pid" 30
	# the newer request finds the lock free and runs at once
	run -0 --separate-stderr rlock -k dep --supersede --label req2 -w 60s -c 'echo run 2 >>log'
	kill -CONT "$a"
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 80
	grep -q 'superseded by a newer --supersede request (.*\[req2\])' "$a_err" || fail "$(cat "$a_err")"
	assert_equal "$(cat log)" "run 2"
	key_absent 'rlock:{dep}:supersede'
}

@test "--supersede waiting out a --lock-delay, stopped past its place's lease: the newer request that took the place replaces it (80), the older never runs" {
	# (found triaging scripts/explore's Ctrl-Z: the lock-delay's busy answer took the
	# place but the request did not know it had, so when continued it took the place
	# back from the newer one as if it were the newer)
	rlock_bg -k dep -t 1s --lock-delay 4s -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	run -0 rlock -k dep --break
	rlock_wait "$h_pid" 30
	rlock_bg -k dep --supersede --label req1 -t 1s -w 60s -c 'echo run 1 >>log'
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 place_is req1
	kill -STOP "$a"
	wait_until 30 key_absent 'rlock:{dep}:supersede' # its place's lease (1 s) ran out
	request 2 -w 60s
	wait_until 30 place_is req2
	kill -CONT "$a"
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 80
	grep -q 'superseded by a newer --supersede request (.*\[req2\])' "$a_err" || fail "$(cat "$a_err")"
	wait_until 30 test -s exit.2
	assert_equal "$(cut -d' ' -f1 exit.2)" 0
	assert_equal "$(cat log)" "run 2"
}

@test "--acquire --supersede: a keeper's request is replaced too (eval gets 80)" {
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	(clean_exec sh -c 'eval "$("$0" -k dep --supersede --label k1 --acquire --log-file "$PWD/k.log")"; echo "$? $(date +%s%3N)" >exit.k' "$RLOCK") \
		</dev/null >out.k 2>err.k &
	track_pid $!
	wait_until 30 place_is k1
	request 2
	wait_until 30 test -s exit.k
	read -r st _ <exit.k
	assert_equal "$st" 80
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 test -s exit.2
	assert_equal "$(cat log)" "run 2"
}

@test "--supersede and --fair on one name: a usage error (64) with one line, either way round" {
	run -64 --separate-stderr rlock -k dep --supersede --fair -- true
	[[ $stderr == *--fair* ]]
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k dep --fair -w 60s -- true
	local f_pid=$RLOCK_PID
	wait_until 30 queued_one
	run -64 --separate-stderr rlock -k dep --supersede -w 5s -- true
	[[ $stderr == *"--fair waiters"* ]] || fail "$stderr"
	[[ $(grep -c . <<<"$stderr") == 1 ]] || fail "$stderr"
	kill "$f_pid"
	rlock_wait "$f_pid" 30
	request 1
	wait_until 30 place_is req1
	run -64 --separate-stderr rlock -k dep --fair -w 5s -- true
	[[ $stderr == *"--supersede request waits"* ]] || fail "$stderr"
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 test -s exit.1
	run -64 --separate-stderr rlock -k dep --supersede -n -- true
}


@test "--supersede beside shared holders or permits: the newer request replaces the older (80), only the newer runs" {
	local mode
	for mode in -s '-l 2'; do
		rm -f h.* exit.* out.* err.*
		: >log
		# shellcheck disable=SC2086  # the mode is two words for -l
		rlock_bg -k dep $mode --label holder -- "$HOLD" h
		local h_pid=$RLOCK_PID
		wait_until 30 test -e h.started
		request 1 -w 60s
		wait_until 30 place_is req1
		request 2 -w 60s
		wait_until 30 place_is req2
		wait_until 30 test -s exit.1
		read -r st _ <exit.1
		[[ $st == 80 ]] || fail "$mode: the older request exited $st, not 80: $(cat err.1)"
		grep -q 'superseded by a newer --supersede request (.*\[req2\])' err.1 ||
			fail "$mode: no line naming req2: $(cat err.1)"
		touch h.release
		rlock_wait "$h_pid" 30
		assert_equal "$RLOCK_STATUS" 0
		wait_until 30 test -s exit.2
		read -r st _ <exit.2
		assert_equal "$st" 0
		assert_equal "$(cat log)" "run 2"
	done
}

# newer_runs_while_stopped PID ERR HOLDER: the stopped --supersede request PID (req1)
# outlives its place's lease, the holder lets go, a newer request (req2) runs; PID,
# resumed, never runs: 80, its stderr names req2, only "run 2" logged.
newer_runs_while_stopped() {
	local a=$1 a_err=$2 h_pid=$3
	wait_until 30 key_absent 'rlock:{dep}:supersede' # its place's lease (1 s) ran out
	touch h.release
	rlock_wait "$h_pid" 30
	run -0 --separate-stderr rlock -k dep --supersede --label req2 -c 'echo run 2 >>log'
	kill -CONT "$a"
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 80
	grep -q 'superseded by a newer --supersede request (.*\[req2\])' "$a_err" || fail "$(cat "$a_err")"
	assert_equal "$(cat log)" "run 2"
}

@test "--supersede stopped past its place's lease while a newer request found the name free and ran: the older never runs after it (80)" {
	# (the place had expired: nothing but the name's last --supersede request,
	# PREFIX{NAME}:supersede:last, kept as long as the history, tells the older one)
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k dep --supersede --label req1 -t 1s -w 60s -c 'echo run 1 >>log'
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 place_is req1
	kill -STOP "$a"
	newer_runs_while_stopped "$a" "$a_err" "$h_pid"
	# its one history record names the newer request, as a replacement that found it would
	run -0 --separate-stderr rlock -k dep --history --json
	jq -e '[.entries[] | select(.event == "superseded")] | length == 1 and
		.[0].label == "req1" and .[0].by.label == "req2"' <<<"$output" >/dev/null || fail "$output"
}

@test "--supersede whose first attempt's reply never came, stopped past its place's lease while a newer request ran: the older never runs after it (80)" {
	# (its first attempt took the place, but it never heard so: only the time of the
	# name's newest request, against the age of its own first attempt, tells it)
	rlock_bg -k dep -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	mute_proxy_start
	touch mute # the replies through it are lost
	rlock_bg -u "$PROXY_URL" --io-timeout 1s -k dep --supersede --label req1 -t 1s -w 60s \
		-c 'echo run 1 >>log'
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 place_is req1
	kill -STOP "$a"
	rm mute
	newer_runs_while_stopped "$a" "$a_err" "$h_pid"
}

@test "a :supersede:last of another type (set by hand): a --supersede request exits 69 having written nothing, --reset deletes it, then it runs" {
	rcli SET 'rlock:{dep}:supersede:last' stray >/dev/null
	run -69 --separate-stderr rlock -k dep --supersede -c 'echo run 1 >>log'
	[[ $stderr == *WRONGTYPE* ]] || fail "$stderr"
	key_absent 'rlock:{dep}:supersede'
	key_absent 'rlock:{dep}'
	run -0 --separate-stderr rlock -k dep --reset
	assert_regex "$stderr" 'deleted rlock:\{dep\}:supersede:last: it held a string'
	run -0 --separate-stderr rlock -k dep --supersede -c 'echo run 2 >>log'
	assert_equal "$(cat log)" "run 2"
}
