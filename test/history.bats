#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: for the command rlock runs; bats sets $output; each test sets URL for the helpers it calls (a test is a subshell)
# The history (issue 28): every run of a name (acquired, and how it ended: released with
# the command's status, broken and by whom, preempted and by whom, expired with no
# release) and every supersession, in PREFIX{NAME}:history, a capped stream written by
# the acquire, release, renew-time and break scripts (config `history = N`, default 100,
# 0 off; `history-retention = DUR`, default 7d). `rlock -k NAME --history [--json] [-n N]` reads it, newest
# first. The same scenario on one server, over three Redlock nodes (each node that
# granted writes; read merged by fence) and on a three-master Cluster.

load helpers
load cluster

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	local _ port pids
	cluster_start
	export CLUSTER_URL=$REDIS_URL CLUSTER_FIRST=$REDIS_PORT
	NODES=
	for _ in 1 2 3; do
		redis_start || return 1
		NODES+=${NODES:+,}$REDIS_URL
		port+=" $REDIS_PORT"
		pids+=" $REDIS_PID"
	done
	export NODES NODE_PORTS=$port NODE_PIDS=$pids
	redis_start
}

teardown_file() { redis_stop_all; }

# a test that stops a server (SIGSTOP) resumes it on any way out
teardown() {
	local p
	for p in "$REDIS_PID" $NODE_PIDS; do
		kill -CONT "$p" 2>/dev/null || true
	done
	common_teardown
}

setup() {
	local p
	for p in $(redis-cli -p "$CLUSTER_FIRST" CLUSTER NODES | awk '$3 ~ /master/ { split($2, a, "[:@]"); print a[2] }') $NODE_PORTS; do
		redis-cli -p "$p" FLUSHALL >/dev/null
	done
	common_setup
	printf 'history = 50\nhistory-retention = 1h\n' >conf
	export RLOCK_CONFIG=$BATS_TEST_TMPDIR/conf
	: >log
	cat >job <<'EOF'
#!/bin/sh
trap 'echo "p end" >>log; exit 3' TERM
touch p.started
i=0
while [ $i -lt 3000 ]; do sleep 0.05; i=$((i + 1)); done
EOF
	chmod +x job
}

# hist: the lock's history as JSON (every entry).
hist() { rlock -u "$URL" -k q --history --json -n 1000; }

# node_history PORT: that node's own history of q, one entry per line (id first).
node_history() {
	redis-cli -p "$1" XRANGE 'rlock:{q}:history' - + | tr '\0' ' ' | paste -sd' ' |
		sed -E 's/ ([0-9]{13}-[0-9]+ )/\n\1/g'
}

# said_why: what each Redlock node recorded and what each background rlock said (a
# failure's evidence: which node disagreed, and why).
said_why() {
	local p f
	for p in $NODE_PORTS; do
		echo "node $p:"
		node_history "$p"
	done
	for f in "$BATS_TEST_TMPDIR"/rlock.*.err; do
		echo "== ${f##*/}"
		cat "$f"
	done
}

# one_end JSON: each run (acquired) has exactly one end record (released, expired,
# broken, preempted, lost) with its token, and no end record is without its run. The
# break of a --preempt reservation (broken, cleared "reservation") ends no run.
one_end() {
	echo "$1" | jq -e '([.entries[] | select(.event == "acquired") | .token] | sort) ==
		([.entries[] | select((.event | IN("released", "expired", "broken", "preempted", "lost")) and .cleared == null) | .token] | sort)' >/dev/null && return 0
	said_why >&3
	fail "not one end record per run: $(echo "$1" | jq -c '[.entries[] | [.event, .fence, .label, .token[0:6]]]')"
}

# runs_of NAME LABEL: NAME's history entries of the runs labelled LABEL, oldest first,
# as "event status" lines.
runs_of() {
	rlock -u "${URL:-$REDIS_URL}" -k "$1" --history --json -n 1000 |
		jq -r --arg l "$2" '[.entries[] | select(.label == $l)] | reverse | .[] | "\(.event) \(.status)"'
}

# holder_rec NAME: NAME's holder records (exclusive: its last renewal; a permit's JSON).
holder_rec() { rcli HGET "rlock:{$1}:owner" renewed; rcli HVALS "rlock:{$1}:meta"; }
# renewed_since NAME R0: NAME's holder renewed since its records said R0.
renewed_since() {
	local r
	r=$(holder_rec "$1")
	[[ -n ${r//$'\n'/} && $r != "$2" ]]
}

# keys_left NAME: NAME's keys, but the releases' marks (rlock:{NAME}:rel:TOKEN: a history
# shorter than 100 entries may trim a release's own record before a release sent again
# looks for it), which must expire with what was left of their lease.
keys_left() {
	local k
	for k in $(rcli --scan --pattern "rlock:{$1}:rel:*"); do
		(($(rcli PTTL "$k") > 0)) || echo "$k (no expiry)"
	done
	rcli --scan --pattern "rlock:{$1}*" | grep -v ':rel:' | sort | tr '\n' ' '
}

# scenario: the runs on $URL, then the history checked. NO_SUPERSEDE: a plain request
# where the others are --supersede requests (Redlock refuses --supersede).
scenario() {
	local h_pid s1 s2 p_pid q_pid b_pid e_pid
	# a run that ends with status 3, while two --supersede requests arrive
	rlock_bg -u "$URL" -k q --label first -- "$HOLD" a 3
	h_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	if [[ -z ${NO_SUPERSEDE:-} ]]; then
		rlock_bg -vv -u "$URL" -k q --supersede --label s1 -- true
		s1=$RLOCK_PID
		wait_until 30 grep -q 'listening for the release' "$RLOCK_ERR"
		rlock_bg -u "$URL" -k q --supersede --label s2 -c 'echo s2 >>log'
		s2=$RLOCK_PID
		rlock_wait "$s1" 30
		assert_equal "$RLOCK_STATUS" 80
	else
		run -64 rlock -u "$URL" -k q --supersede --label s1 -- true
		rlock_bg -vv -u "$URL" -k q --label s2 -c 'echo s2 >>log'
		s2=$RLOCK_PID
		wait_until 30 grep -q 'listening for the release' "$RLOCK_ERR"
	fi
	touch a.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	rlock_wait "$s2" 30
	assert_equal "$RLOCK_STATUS" 0
	# a --preemptible run preempted
	rlock_bg -vv -u "$URL" -k q -t 3s --preemptible --label nightly -- ./job
	p_pid=$RLOCK_PID
	wait_until 30 test -e p.started
	rlock_bg -vv -u "$URL" -k q -t 3s --preempt --label hotfix -c 'echo hotfix >>log'
	q_pid=$RLOCK_PID
	rlock_wait "$p_pid" 30
	assert_equal "$RLOCK_STATUS" 81
	rlock_wait "$q_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	# a run broken by the operator
	rlock_bg -u "$URL" -k q --label broken -- "$HOLD" b
	b_pid=$RLOCK_PID
	wait_until 30 test -e b.started
	run -0 rlock -u "$URL" -k q --break
	touch b.release
	rlock_wait "$b_pid" 30
	# a run whose rlock dies: it expires with no release, seen by the next acquire
	rlock_bg -u "$URL" -k q -t 1s --label dies -- "$HOLD" e
	e_pid=$RLOCK_PID
	wait_until 30 test -e e.started
	kill -KILL "$e_pid"
	rlock_wait "$e_pid" 30
	run -0 rlock -u "$URL" -k q -w 30s --label last -- true

	run -0 --separate-stderr hist
	local j=$output
	echo "$j" | jq -c '.entries[] | [.event, .fence, .label, .status, .by.label, .by.pid]' >&3
	# newest first, fences never rising
	echo "$j" | jq -e '[.entries[].fence] | . == (sort | reverse)' >/dev/null || fail "not newest first: $j"
	ev() { echo "$j" | jq -e "$1" >/dev/null || fail "no $1 in: $j"; }
	ev '[.entries[] | select(.event == "released" and .label == "first" and .status == 3)] | length == 1'
	[[ -n ${NO_SUPERSEDE:-} ]] ||
		ev '[.entries[] | select(.event == "superseded" and .label == "s1" and .by.label == "s2" and (.by.pid | type) == "number")] | length == 1'
	ev '[.entries[] | select(.event == "released" and .label == "s2" and .status == 0)] | length == 1'
	ev '[.entries[] | select(.event == "preempted" and .label == "nightly" and .by.label == "hotfix")] | length == 1'
	# the preempted run's status is its command's (the trap's exit 3), not rlock's 81
	ev '[.entries[] | select(.event == "preempted" and .label == "nightly")][0].status == 3'
	one_end "$j"
	ev '[.entries[] | select(.event == "broken" and .label == "broken" and (.by.pid | type) == "number")] | length == 1'
	ev '[.entries[] | select(.event == "expired" and .label == "dies")] | length == 1'
	ev '[.entries[] | select(.event == "acquired")] | length == 7'
	ev '[.entries[] | select(.event == "acquired" and .label == "dies")][0].fence == [.entries[] | select(.event == "expired")][0].fence'
	ev '[.entries[] | select(.event == "acquired" and .label == "last")][0].fence == ([.entries[].fence] | max)'
	assert_equal "$(cat log)" "s2
p end
hotfix"
	# the text form: newest first, one line each
	run -0 --separate-stderr rlock -u "$URL" -k q --history -n 2
	assert_equal "${#lines[@]}" 2
	[[ ${lines[0]} == *released*last* ]] || fail "${lines[0]}"
}

@test "history on one server: each run with its outcome, fence and who preempted, broke or superseded it" {
	URL=$REDIS_URL
	scenario
	# the stream expires after its retention when nothing is written
	local ttl
	ttl=$(rcli PTTL 'rlock:{q}:history')
	((ttl > 3500000 && ttl <= 3600000)) || fail "PTTL $ttl"
}

@test "history over three Redlock nodes: written where granted, merged by fence" {
	URL=$NODES NO_SUPERSEDE=1
	scenario
}

# settled PORT NAME: the node on PORT holds nothing of NAME's (no lock, no --preempt mark
# or reservation; an open run, whose end it never heard, stays for the next acquire to
# find expired).
settled() {
	[[ $(redis-cli -p "$1" EXISTS "rlock:{$2}" "rlock:{$2}:preempt") == 0 ]]
}

@test "history over three Redlock nodes: a node that lags through a preemption keeps no reservation, and each run has one end" {
	# The third node is stopped while a --preempt request stops the --preemptible
	# holder: the request's attempts and the holder's release there wait, in whatever
	# order the node reads them once resumed, after the request ran on the other two
	# nodes and released. The node may hand itself to the request, which never comes
	# back: its release ends that reservation there (else it kept the node from the next
	# holder, and the holder's run open). The merged history gives each run one end.
	URL=$NODES
	local third_pid=${NODE_PIDS##* } third_port=${NODE_PORTS##* } p_pid q_pid
	rlock_bg -u "$URL" -k q -t 6s --preemptible --label nightly -- ./job
	p_pid=$RLOCK_PID
	wait_until 30 test -e p.started
	kill -STOP "$third_pid"
	rlock_bg -u "$URL" -k q -t 6s --preempt --label hotfix -c 'echo hotfix >>log'
	q_pid=$RLOCK_PID
	rlock_wait "$p_pid" 60
	assert_equal "$RLOCK_STATUS" 81
	rlock_wait "$q_pid" 60
	assert_equal "$RLOCK_STATUS" 0
	kill -CONT "$third_pid"
	wait_until 30 settled "$third_port" q
	run -0 --separate-stderr rlock -u "$URL" -k q --label last -- true
	[[ $stderr != *degraded* ]] || fail "$stderr"
	run -0 --separate-stderr hist
	local j=$output
	one_end "$j"
	echo "$j" | jq -e '[.entries[] | select(.event == "preempted" and .label == "nightly" and .by.label == "hotfix" and .status == 3)] | length == 1' >/dev/null ||
		fail "not preempted by hotfix, once: $j"
	echo "$j" | jq -e '[.entries[] | select(.event == "acquired")] | length == 3' >/dev/null || fail "$j"
	assert_equal "$(cat log)" "p end
hotfix"
}

@test "history over three Redlock nodes: a --preempt request's release ends the reservation a node kept for it, and the preempted run there" {
	# What a node that read the preempted holder's release after the request's last
	# attempt there holds (the CI case: 2 ms apart): the node handed to the request,
	# which took its quorum on the other two and never comes back. Made by hand on the
	# third node (stopped through the hand-over), as release.lua writes it.
	URL=$NODES
	local third_pid=${NODE_PIDS##* } third_port=${NODE_PORTS##* } first_port p_pid q_pid nt ht
	first_port=${NODE_PORTS# } && first_port=${first_port%% *}
	rlock_bg -u "$URL" -k q -t 6s --preemptible --label nightly -- ./job
	p_pid=$RLOCK_PID
	wait_until 30 test -e p.started
	nt=$(redis-cli -p "$first_port" GET 'rlock:{q}')
	kill -STOP "$third_pid"
	# a long lease: its renewal (which would take the node, handed to it) comes late;
	# a node timeout with room for a loaded machine: its release must reach the third
	# node (a connect that times out sends nothing there)
	rlock_bg -vv -u "$URL" -k q -t 60s --node-timeout 3s --preempt --label hotfix -- "$HOLD" h
	q_pid=$RLOCK_PID
	rlock_wait "$p_pid" 60
	assert_equal "$RLOCK_STATUS" 81
	wait_until 30 test -e h.started
	ht=$(redis-cli -p "$first_port" GET 'rlock:{q}')
	kill -CONT "$third_pid"
	wait_until 30 redis-cli -p "$third_port" PING >/dev/null
	local n3=(redis-cli -p "$third_port")
	"${n3[@]}" DEL 'rlock:{q}' 'rlock:{q}:owner' >/dev/null
	"${n3[@]}" HSET 'rlock:{q}:preempt' token "$ht" host "$(hostname)" pid "$q_pid" label hotfix \
		handover 1 from "$nt" fstatus 3 hist 50 hret 3600000 >/dev/null
	"${n3[@]}" PEXPIRE 'rlock:{q}:preempt' 60000 >/dev/null
	[[ $("${n3[@]}" GET 'rlock:{q}:history:run' | tr '\0' ' ') == *"$nt"* ]] || fail "the preempted run is not open on the third node"
	touch h.release
	rlock_wait "$q_pid" 60
	assert_equal "$RLOCK_STATUS" 0
	[[ $("${n3[@]}" EXISTS 'rlock:{q}:preempt' 'rlock:{q}:history:run') == 0 ]] ||
		fail "the third node kept the reservation or the run: $("${n3[@]}" HGETALL 'rlock:{q}:preempt' | paste -sd' ')
$(said_why)"
	"${n3[@]}" XREVRANGE 'rlock:{q}:history' + - COUNT 1 | grep -qx preempted ||
		fail "no preempted record on the third node: $(said_why)"
	run -0 --separate-stderr rlock -u "$URL" -k q --label last -- true
	[[ $stderr != *degraded* ]] || fail "$stderr"
	run -0 --separate-stderr hist
	one_end "$output"
	echo "$output" | jq -e '[.entries[] | select(.event == "preempted" and .label == "nightly" and .by.label == "hotfix" and .status == 3)] | length == 1' >/dev/null ||
		fail "not preempted by hotfix, once: $output"
}

@test "history on a three-master Cluster: same hash tag" {
	URL=$CLUSTER_URL
	scenario
}

@test "--history -n N reads the options after it (as --help writes it); a config file's no-wait is no count" {
	local i
	for i in 1 2 3; do
		rlock -k hc -- true || fail "run $i failed"
	done
	# --help: --history [-n N] [--json]
	run -0 --separate-stderr rlock -k hc --history -n 2 --json
	assert_equal "$(echo "$output" | jq '.entries | length')" 2
	run -0 --separate-stderr rlock -k hc --history -n 1 -q
	assert_equal "${#lines[@]}" 1
	[[ ${lines[0]} == *released*'fence 3'* ]] || fail "${lines[0]}"
	run -0 --separate-stderr rlock -k hc --history --json -n 1
	assert_equal "$(echo "$output" | jq '.entries | length')" 1
	# a config file that never waits (no-wait, wait = 0: a CI's choice) gives --history
	# no -n: the default count, not a usage error
	printf 'no-wait = true\n' >nw.conf
	run -0 --separate-stderr rlock --config nw.conf -k hc --history
	assert_equal "${#lines[@]}" 6
	printf 'wait = 0\n' >nw.conf
	run -0 --separate-stderr rlock --config nw.conf -k hc --history --json
	assert_equal "$(echo "$output" | jq '.entries | length')" 6
	# -n without its count, or a word left after it: 64, nothing read
	run -64 --separate-stderr rlock -k hc --history -n
	assert_equal "$output" ""
	run -64 --separate-stderr rlock -k hc --history -n 2 3
	assert_equal "$output" ""
	run -64 --separate-stderr rlock -k hc --history -n 2 --json x
	assert_equal "$output" ""
}

@test "-n N before --history: -n takes no value (flock's), so N would be the command; one line, 64, nothing run or taken; after -- it is a command" {
	local fence
	fence=$(rcli GET 'rlock:{hn}:fence')
	run -64 --separate-stderr rlock -k hn -n 5 --history
	assert_equal "$stderr" "rlock: -n takes no value (as flock's): -n 5 before --history would run a command named '5'; the last 5 runs: --history -n 5 (try 'rlock --help')"
	assert_equal "$output" ""
	run -64 --separate-stderr rlock -n 3 -k hn --history --json
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$(rcli GET 'rlock:{hn}:fence')" "$fence" # nothing was taken
	# a command after --, or one not named by a number, is a command as flock's is
	run -0 --separate-stderr rlock -k hn -n -- sh -c 'echo "$1"' 5 --history
	assert_equal "$output" --history
	printf '#!/bin/sh\necho "ran $*"\n' >./5
	chmod +x ./5
	PATH=$PWD:$PATH run -0 --separate-stderr rlock -k hn -n -- 5 --history
	assert_equal "$output" "ran --history"
}

@test "--history of a name whose history key is of another type (set by hand): 69 naming it, never 'no history yet'; a name never used: no history, 0" {
	run -0 --separate-stderr rlock -k never --history
	assert_output 'rlock:{never}: no history yet (no run recorded under this name, or none within the retention)'
	run -0 --separate-stderr rlock -k never --history --json
	assert_equal "$(jq -c .entries <<<"$output")" '[]'
	# a user's own key where the stream goes: the runs go on, unrecorded (best effort)
	rcli SET 'rlock:{ws}:history' mine >/dev/null
	run -0 rlock -k ws -- true
	assert_equal "$(rcli GET 'rlock:{ws}:history')" mine
	run -69 --separate-stderr rlock -k ws --history
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "WRONGTYPE rlock:\{ws\}:history is a string, not the stream of rlock's history"
	run -69 --separate-stderr rlock -k ws --history --json
	assert_equal "$output" ""
}

@test "history is capped at the configured length; 0 writes none" {
	printf 'history = 5\n' >conf
	local _
	for _ in 1 2 3 4 5 6 7 8; do
		run -0 rlock -k c -- true
	done
	assert_equal "$(rcli XLEN 'rlock:{c}:history')" 5
	run -0 --separate-stderr rlock -k c --history --json
	assert_equal "$(echo "$output" | jq '.entries | length')" 5
	run -0 --separate-stderr rlock -k c --history --json -n 3
	assert_equal "$(echo "$output" | jq '.entries | length')" 3
	assert_equal "$(echo "$output" | jq -r '.entries[0].event')" released
	printf 'history = 0\n' >conf
	run -0 rlock -k off -- true
	assert_equal "$(rcli EXISTS 'rlock:{off}:history')" 0
	run -64 --separate-stderr rlock -k c --history -n x
}

@test "history is on by default: about 100 entries (MAXLEN ~ 100), expiring after 7 days" {
	: >conf
	local _ n p
	for _ in $(seq 110); do
		rlock -k d -- true || fail "a run failed"
	done
	# 220 entries written; approximate trimming drops whole nodes of 100
	n=$(rcli XLEN 'rlock:{d}:history')
	((n >= 100 && n <= 200)) || fail "XLEN $n"
	p=$(rcli PTTL 'rlock:{d}:history')
	((p > 6 * 86400000 && p <= 7 * 86400000)) || fail "PTTL $p"
	run -0 --separate-stderr rlock -k d --history --json -n 2
	assert_equal "$(echo "$output" | jq -r '[.entries[].event] | join(" ")')" 'released acquired'
	# nothing but the fence counter and the expiring history is left
	assert_equal "$(rcli --scan --pattern 'rlock:{d}*' | sort | tr '\n' ' ')" 'rlock:{d}:fence rlock:{d}:history '
}

@test "history: labels are escaped (text) and JSON-encoded" {
	run -0 rlock -k esc --label $'evil\e[31m"x' -- true
	run -0 --separate-stderr rlock -k esc --history
	[[ $output != *$'\e'* ]] || fail "raw escape in: $output"
	run -0 --separate-stderr rlock -k esc --history --json
	assert_equal "$(echo "$output" | jq -r '.entries[0].label')" $'evil\e[31m"x'
}

@test "history: every field read back is escaped for the terminal, whoever wrote the stream" {
	# The stream is plain Redis data: another client can XADD an entry whose event,
	# fence, pid, status, cleared marks or breaker's user hold terminal escapes and
	# line breaks. --history prints each field escaped, on one line per entry.
	run -0 rlock -k esc2 -- true
	rcli XADD 'rlock:{esc2}:history' '*' ev $'x\e]0;ev\a' fence $'1\e[2J' token t host h \
		pid $'9\rpid' user u status $'0\e[31m' cleared $'c\e[5m' by_host b by_pid $'1\n2' \
		by_user $'u\e[1m' >/dev/null
	run -0 --separate-stderr rlock -k esc2 --history
	[[ $output != *$'\e'* && $output != *$'\r'* && $output != *$'\a'* ]] ||
		fail "a raw control character reached the terminal: $(cat -v <<<"$output")"
	assert_equal "${#lines[@]}" 3
	assert_line --index 0 --partial 'x\x1b]0;ev\x07  fence 1\x1b[2J  h pid 9\x0dpid  status 0\x1b[31m  cleared c\x1b[5m  by b pid 1\x0a2 (user u\x1b[1m)'
}

# fenceless URL: on URL, name nf: a run, a --lock-delay holder broken, then --reset of
# its lock-delay alone: a record with no fence (no run is concerned) and no token.
fenceless() {
	rlock -u "$1" -k nf -- true
	rm -f p.started
	rlock_bg -u "$1" -k nf -t 2s --lock-delay 1h -- ./job
	local holder=$RLOCK_PID
	wait_until 20 test -e p.started
	run -0 --separate-stderr rlock -u "$1" -k nf --break
	rlock_wait "$holder" 20
	run -0 --separate-stderr rlock -u "$1" -k nf --label ops --reset
	[[ $stderr == *"lifted the lock-delay"* ]] || fail "$stderr"
}

@test "history: a record without a fence, pid or status shows none of them (no '?'), null in JSON" {
	fenceless "$REDIS_URL"
	run -0 --separate-stderr rlock -k nf --history
	assert_equal "${#lines[@]}" 5
	[[ ${lines[0]} == *"  reset       "* ]] || fail "newest: ${lines[0]}"
	[[ ${lines[0]} != *fence* && ${lines[0]} != *'?'* ]] || fail "${lines[0]}"
	[[ ${lines[0]} == *"cleared lock-delay  by "*" pid "*"[ops]" ]] || fail "${lines[0]}"
	run -0 --separate-stderr rlock -k nf --history --json -n 1
	echo "$output" | jq -e '.entries | length == 1 and .[0].event == "reset" and
		.[0].fence == null and .[0].status == null' >/dev/null || fail "$output"
	# A --break of a --preempt reservation (preempt.bats) has no fence either; a record
	# another client wrote may lack the host, pid or token too: each is left out.
	rcli XADD 'rlock:{nf}:history' '*' ev broken token t host h label hotfix \
		cleared reservation by_host b by_pid 7 by_label ops >/dev/null
	rcli XADD 'rlock:{nf}:history' '*' ev released token t pid 9 >/dev/null
	rcli XADD 'rlock:{nf}:history' '*' ev expired by_pid 8 >/dev/null
	run -0 --separate-stderr rlock -k nf --history -n 3
	assert_equal "${#lines[@]}" 3
	[[ ${lines[0]} =~ ^[0-9-]+\ [0-9:]+\ \ expired\ *\ \ by\ pid\ 8$ ]] || fail "${lines[0]}"
	[[ ${lines[1]} =~ ^[0-9-]+\ [0-9:]+\ \ released\ *\ \ pid\ 9$ ]] || fail "${lines[1]}"
	[[ ${lines[2]} =~ ^[0-9-]+\ [0-9:]+\ \ broken\ *\ \ h\ \[hotfix\]\ \ cleared\ reservation\ \ by\ b\ pid\ 7\ \[ops\]$ ]] ||
		fail "${lines[2]}"
	run -0 --separate-stderr rlock -k nf --history --json -n 3
	echo "$output" | jq -e '[.entries[] | [.fence, .pid, .host, .status]] ==
		[[null, null, null, null], [null, 9, null, null], [null, null, "h", null]]' >/dev/null ||
		fail "$output"
}

@test "history over three Redlock nodes: a record without a fence (--reset) is listed where it came, newest first, each one once" {
	fenceless "$NODES"
	fenceless "$NODES"
	run -0 --separate-stderr rlock -u "$NODES" -k nf --history
	assert_equal "${#lines[@]}" 10
	[[ ${lines[0]} == *"  reset       "* && ${lines[5]} == *"  reset       "* ]] || fail "$output"
	[[ ${lines[1]} == *"  broken      fence 4 "* && ${lines[6]} == *"  broken      fence 2 "* ]] ||
		fail "$output"
	run -0 --separate-stderr rlock -u "$NODES" -k nf --history --json
	echo "$output" | jq -e '[.entries[] | .event] == ["reset", "broken", "acquired", "released",
		"acquired", "reset", "broken", "acquired", "released", "acquired"]' >/dev/null ||
		fail "$output"
}

@test "history is best effort: a user whose ACL lacks +xadd +xrevrange still gets the lock" {
	rcli ACL SETUSER nohist on '>pw' '~rlock:*' '&rlock:*' +@all -xadd -xrevrange >/dev/null
	RLOCK_PASSWORD=pw run -0 --separate-stderr rlock --user nohist -k acl -- echo ran
	rcli ACL DELUSER nohist >/dev/null
	assert_output ran
	assert_equal "$(rcli EXISTS 'rlock:{acl}:history')" 0
	assert_equal "$(rcli EXISTS 'rlock:{acl}')" 0
}

# modes NAME ARGS...: on NAME with ARGS (-s, -l 2, --fair): two overlapping runs (one
# exits 3), then one more (exits 5): each acquired and released with its status.
modes() {
	local name=$1 a
	shift
	rlock_bg -u "$URL" -k "$name" "$@" --label one -- "$HOLD" "$name.1" 3
	a=$RLOCK_PID
	wait_until 30 test -e "$name.1.started"
	if [[ $1 != --fair ]]; then
		run -0 rlock -u "$URL" -k "$name" "$@" --label two -c 'exit 0'
	fi
	touch "$name.1.release"
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 3
	run -5 rlock -u "$URL" -k "$name" "$@" -w 30s --label three -c 'exit 5'
	assert_equal "$(runs_of "$name" one)" 'acquired null
released 3'
	assert_equal "$(runs_of "$name" three)" 'acquired null
released 5'
	if [[ $1 != --fair ]]; then
		assert_equal "$(runs_of "$name" two)" 'acquired null
released 0'
	fi
	one_end "$(rlock -u "$URL" -k "$name" --history --json -n 1000)"
}

@test "history: runs of -s, --limit 2 and --fair are recorded, released with the command's status" {
	URL=$REDIS_URL
	modes sh -s
	modes lim -l 2
	modes fair --fair
	# the open runs' keys go with the last run: the fence and the history are left
	local n
	for n in sh lim fair; do
		assert_equal "$(keys_left "$n")" "rlock:{$n}:fence rlock:{$n}:history "
	done
}

@test "history: a run that outlives the retention keeps its record (acquired, then released), exclusive, -s and --limit" {
	# retention 1 s, a run of 2.5 s renewed all along: the stream and the open run live
	# while the lease does, so the end is recorded against its acquire
	printf 'history = 50\nhistory-retention = 1s\n' >conf
	local m args
	for m in x s l; do
		args=()
		[[ $m == s ]] && args=(-s)
		[[ $m == l ]] && args=(-l 2)
		run -0 --separate-stderr rlock -u "$REDIS_URL" -t 600ms -k "long$m" "${args[@]}" -- sleep 2.5
		run -0 --separate-stderr rlock -u "$REDIS_URL" -k "long$m" --history --json
		assert_equal "$(jq -c '[.entries[].event]' <<<"$output")" '["released","acquired"]'
	done
}

@test "history: -s, --limit and --fair on a three-master Cluster (one server: not Redlock)" {
	URL=$CLUSTER_URL
	modes sh -s
	modes lim -l 2
	modes fair --fair
}

# broken_once NAME ARGS...: a holder of NAME (with ARGS) broken by --break: it exits 79,
# its run ends broken (by the breaker's pid), once.
broken_once() {
	local name=$1
	shift
	rlock_bg -k "$name" "$@" -t 3s --label broken -- "$HOLD" "$name"
	wait_until 30 test -e "$name.started"
	run -0 rlock -k "$name" --break
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_equal "$(runs_of "$name" broken)" 'acquired null
broken null'
	rlock -k "$name" --history --json | jq -e '.entries[0].by.pid | type == "number"' >/dev/null ||
		fail "no breaker in $(rlock -k "$name" --history --json)"
}

# kill_hard TAG: SIGKILL the rlock of `hold TAG` (RLOCK_PID), its watchdog and the
# command, each by pid: nobody is left to release or to record anything.
kill_hard() {
	local w p
	for p in $(children_of "$RLOCK_PID"); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == rlock-watchdog ]] && w=$p
	done
	[[ -n ${w:-} ]] || fail "no watchdog of $RLOCK_PID"
	kill -KILL "$RLOCK_PID" "$w" "$(cat "$1.pid")"
	rlock_wait "$RLOCK_PID" 30
	wait_until 30 proc_gone "$w"
}

@test "history: a shared holder or permit killed hard ends as expired, once, seen by the next one" {
	# -s: the dead lease ends, its keys expire; the next shared holder records it
	rlock_bg -k e1 -s -t 1s --label dies -- "$HOLD" e1
	wait_until 30 test -e e1.started
	kill_hard e1
	wait_until 30 key_absent 'rlock:{e1}:holders'
	run -0 rlock -k e1 -s --label next -- true
	assert_equal "$(runs_of e1 dies)" 'acquired null
expired null'
	# --limit 1: the next one waits until the dead lease is over and drops it
	rlock_bg -k e2 -l 1 -t 1s --label dies -- "$HOLD" e2
	wait_until 30 test -e e2.started
	kill_hard e2
	run -0 rlock -k e2 -l 1 -w 30s --label next -- true
	assert_equal "$(runs_of e2 dies)" 'acquired null
expired null'
	# an exclusive request after a dead shared holder
	rlock_bg -k e3 -s -t 1s --label dies -- "$HOLD" e3
	wait_until 30 test -e e3.started
	kill_hard e3
	run -0 rlock -k e3 -w 30s --label next -- true
	assert_equal "$(runs_of e3 dies)" 'acquired null
expired null'
	local n
	for n in e1 e2 e3; do
		one_end "$(rlock -k $n --history --json -n 1000)"
		assert_equal "$(keys_left "$n")" "rlock:{$n}:fence rlock:{$n}:history "
	done
}

@test "history: a holder that sees its lease gone records lost, with its command's status, once" {
	# the lock deleted under a holder: its renewal finds it gone, the command is
	# stopped (SIGTERM: 143), rlock exits 79; the run ends lost with 143
	rlock_bg -k l1 -t 3s --label gone -- "$HOLD" l1 7
	wait_until 30 test -e l1.started
	rcli DEL 'rlock:{l1}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	run -0 rlock -k l1 --label next -- true
	assert_equal "$(runs_of l1 gone)" 'acquired null
lost 143'
	# the same for a shared holder
	rlock_bg -k l2 -s -t 3s --label gone -- "$HOLD" l2 7
	wait_until 30 test -e l2.started
	rcli DEL 'rlock:{l2}:holders' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	run -0 rlock -k l2 -s --label next -- true
	assert_equal "$(runs_of l2 gone)" 'acquired null
lost 143'
	# stopped past its lease, nobody took it: lost when it comes back (the watchdog
	# killed the command: 137)
	rlock_bg -k l3 -t 1s --label stopped -- "$HOLD" l3
	wait_until 30 test -e l3.started
	kill -STOP "$RLOCK_PID"
	wait_until 30 key_absent 'rlock:{l3}'
	wait_until 30 pidfile_gone l3.pid
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	run -0 rlock -k l3 --label next -- true
	assert_equal "$(runs_of l3 stopped)" 'acquired null
lost 137'
	# stopped past its lease while another run took the lock and ended: that one
	# recorded it expired; the holder, back, records nothing more
	rlock_bg -k l4 -t 1s --label stopped -- "$HOLD" l4
	wait_until 30 test -e l4.started
	kill -STOP "$RLOCK_PID"
	run -0 rlock -k l4 -w 30s --label next -- true
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_equal "$(runs_of l4 stopped)" 'acquired null
expired null'
	# broken by an operator (exclusive, shared): broken and by whom, not lost too
	broken_once l5
	broken_once l6 -s
	local n
	for n in l1 l2 l3 l4 l5 l6; do
		one_end "$(rlock -k $n --history --json -n 1000)"
	done
}

# take_away URL NAME MODE: delete NAME's lock as an expiry leaves it (the lock and its
# holder's record, or a permit's entries and records) on every server of URL, by hand.
take_away() {
	local keys=("rlock:{$2}" "rlock:{$2}:owner") p
	[[ -z $3 ]] || keys=("rlock:{$2}:holders" "rlock:{$2}:meta")
	case $1 in
	"$NODES") for p in $NODE_PORTS; do redis-cli -p "$p" DEL "${keys[@]}" >/dev/null; done ;;
	"$CLUSTER_URL") redis-cli -c -p "$CLUSTER_FIRST" DEL "${keys[@]}" >/dev/null ;;
	*) rcli DEL "${keys[@]}" >/dev/null ;;
	esac
}

@test "history: a lock taken away before its lease could end (its keys deleted as an expiry leaves them) records lost, as rlock's 79 and its lost line say, never expired (exclusive, -s, --limit; a Cluster; Redlock)" {
	# found by the release (the command ends before any renewal): exit 79; found by a
	# renewal with --on-lost ignore: the command's 0. Each run at once, in parallel.
	local u m k n=0 cases=() pids=()
	for u in "$REDIS_URL" "$CLUSTER_URL" "$NODES"; do
		for m in "" -s "-l 2"; do
			[[ $u == "$REDIS_URL" || -z $m ]] || continue
			for k in rel ren; do
				n=$((n + 1))
				cases+=("$u|$m|$k$n")
				if [[ $k == rel ]]; then
					# shellcheck disable=SC2086 # the mode: none or one or two words
					rlock_bg -u "$u" -k "$k$n" $m -t 20s --label gone --events "$k$n.jsonl" -- "$HOLD" "$k$n"
				else
					# shellcheck disable=SC2086
					rlock_bg -u "$u" -k "$k$n" $m -t 3s --on-lost ignore --label gone --events "$k$n.jsonl" -- "$HOLD" "$k$n"
				fi
				pids+=("$RLOCK_PID")
			done
		done
	done
	local c i=0
	for c in "${cases[@]}"; do
		IFS='|' read -r u m k <<<"$c"
		wait_until 30 test -e "$k.started"
		take_away "$u" "$k" "$m"
	done
	for c in "${cases[@]}"; do
		IFS='|' read -r u m k <<<"$c"
		[[ $k != ren* ]] || wait_until 30 grep -q '"event":"lost"' "$k.jsonl"
		touch "$k.release"
	done
	for c in "${cases[@]}"; do
		IFS='|' read -r u m k <<<"$c"
		rlock_wait "${pids[i++]}" 30
		assert_equal "$k ${m:--x} status $RLOCK_STATUS" "$k ${m:--x} status $([[ $k == rel* ]] && echo 79 || echo 0)"
		# its one run, one end (one_end's check)
		assert_equal "$k ${m:--x}: $(URL=$u runs_of "$k" gone | tr '\n' ' ')" "$k ${m:--x}: acquired null lost 0 "
		[[ $(jq -r 'select(.event == "lost") | .reason' "$k.jsonl") == *'taken away'*'before its lease could end'* ]] ||
			fail "$k: $(cat "$k.jsonl")"
	done
}

@test "history over three Redlock nodes: a holder stopped past its lease records lost on the nodes" {
	URL=$NODES
	local p
	rlock_bg -u "$URL" -k rl -t 1s --label stopped -- "$HOLD" rl 7
	wait_until 30 test -e rl.started
	kill -STOP "$RLOCK_PID"
	for p in $NODE_PORTS; do
		wait_until 30 eval "[[ \$(redis-cli -p $p EXISTS 'rlock:{rl}') == 0 ]]"
	done
	wait_until 30 pidfile_gone rl.pid
	kill -CONT "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	run -0 rlock -u "$URL" -k rl --label next -- true
	assert_equal "$(runs_of rl stopped)" 'acquired null
lost 137'
	for p in $NODE_PORTS; do
		assert_equal "$(redis-cli -p "$p" XREVRANGE 'rlock:{rl}:history' + - | grep -c '^lost$')" 1
	done
	one_end "$(rlock -u "$URL" -k rl --history --json -n 1000)"
}

@test "history: the end record agrees with the exit status when the server stops (79: lost; a command ended inside its lease: 0, expired)" {
	# a server stopped while rlock holds (exclusive, then a permit of -l 2): rlock
	# declares the loss on its own clock (4/5 of the ttl), stops the command and exits
	# 79; the server back before the lease can end there, its release finds the lock
	# still its own: it frees it and the run ends lost, not released
	local mode n=0 st
	for mode in '' '-l 2'; do
		n=$((n + 1))
		# shellcheck disable=SC2086  # the mode is two words for -l
		rlock_bg -k "a$n" $mode -t 6s --label paused -- "$HOLD" "a$n"
		wait_until 30 test -e "a$n.started"
		kill -STOP "$REDIS_PID"
		wait_until 30 pidfile_gone "a$n.pid"
		kill -CONT "$REDIS_PID"
		rlock_wait "$RLOCK_PID" 30
		assert_equal "$RLOCK_STATUS" 79
		st=$(runs_of "a$n" paused | tail -n 1)
		[[ $st == 'lost '* ]] || fail "${mode:--x}: exit 79 but the end record is '$st'"
		# freed by that release: the next run gets it at once
		# shellcheck disable=SC2086
		run -0 rlock -k "a$n" $mode -n -- true
	done
	# the command ends inside its lease, then the server stops: the release cannot
	# get through before the lease ends by rlock's clock (exit 0, the command's own);
	# sent meanwhile, it reaches the server only after the lease ran out there: the
	# run held the lock to its end, its record is expired with status 0, not lost
	# a release before, so that the server knows the release script: sent by its sha
	# alone, it runs when the server is back (NOSCRIPT would ask for it again)
	# (exclusive, then a permit of -l 2, whose keys expire with its lease)
	local r0
	n=0
	for mode in '' '-l 2'; do
		n=$((n + 1))
		# shellcheck disable=SC2086  # the mode is two words for -l
		run -0 rlock -k b0 $mode -- true
		# shellcheck disable=SC2086
		rlock_bg -k "b$n" $mode -t 2s --label late -- "$HOLD" "b$n"
		wait_until 30 test -e "b$n.started"
		# after a renewal (ttl/3): the release goes on the renewal's open connection,
		# so it is in the stopped server's socket, not a connection still to be made
		r0=$(holder_rec "b$n")
		wait_until 30 renewed_since "b$n" "$r0"
		kill -STOP "$REDIS_PID"
		touch "b$n.release"
		rlock_wait "$RLOCK_PID" 30
		assert_equal "$RLOCK_STATUS" 0
		# the key's lease ends on the server's clock at most a round trip after rlock's
		sleep 1
		kill -CONT "$REDIS_PID"
		wait_until 30 eval '[[ -n $(runs_of "b$n" late | sed 1d) ]]'
		assert_equal "$(runs_of "b$n" late)" 'acquired null
expired 0'
	done
}

# kept_then_broken: a run kept by --min-hold after its command exited, broken by the
# operator (with --token when asked), then its history: one end record, released.
kept_then_broken() {
	local tok=()
	run -0 rlock -u "$URL" -k q --min-hold 1h --label kept -- true
	run rlock -u "$URL" -k q --status
	assert_output --partial 'kept by --min-hold'
	[[ $1 != token ]] || tok=(--token "$(rcli GET 'rlock:{q}')")
	run -0 rlock -u "$URL" -k q --break "${tok[@]}"
	run -0 rlock -u "$URL" -k q -n -- true
	one_end "$(hist)"
	run -0 runs_of q kept
	assert_output $'acquired null\nreleased 0'
}

@test "history: --break of a lock kept by --min-hold adds no second end record (its run ended released)" {
	URL=$REDIS_URL
	kept_then_broken
	rcli FLUSHALL >/dev/null
	kept_then_broken token
	URL=$NODES
	kept_then_broken
}

@test "history: a run whose lease ran out unreleased (its holder killed hard) reads as expired (not recorded yet) before the next acquisition records it; a live run has no end (exclusive, -s, --limit on one server and a Cluster; Redlock)" {
	local u m k n_dead=0 j
	for u in "$REDIS_URL" "$CLUSTER_URL" "$NODES"; do
		for m in "" -s "-l 2"; do
			[[ $u != "$NODES" || -z $m ]] || continue # Redlock: exclusive only
			k=dead$((++n_dead))
			# shellcheck disable=SC2086 # the mode: none or one or two words
			rlock_bg -u "$u" -k "$k" $m -t 1s --label dies -- "$HOLD" "$k"
			wait_until 30 test -e "$k.started"
			# alive: its run is open, no end is shown
			run -0 --separate-stderr rlock -u "$u" -k "$k" --history --json
			assert_equal "$k: $(jq -r '[.entries[].event] | join(" ")' <<<"$output")" "$k: acquired"
			if [[ $u == "$NODES" ]]; then
				# one node of three lost it (another token there): the run lives on the
				# others, and that node's view alone ends nothing
				redis-cli -p "$(awk '{ print $1 }' <<<"$NODE_PORTS")" \
					SET "rlock:{$k}" other PX 60000 >/dev/null
				run -0 --separate-stderr rlock -u "$u" -k "$k" --history --json
				assert_equal "$k: $(jq -r '[.entries[].event] | join(" ")' <<<"$output")" "$k: acquired"
				redis-cli -p "$(awk '{ print $1 }' <<<"$NODE_PORTS")" DEL "rlock:{$k}" >/dev/null
			fi
			kill_hard "$k"
			# its lease runs out: the name is free, and nobody acquired it since
			wait_until 30 rlock -u "$u" -k "$k" --status
			run -0 --separate-stderr rlock -u "$u" -k "$k" --history --json
			j=$output
			assert_equal "$k: $(jq -r '[.entries[] | "\(.event) \(.recorded)"] | join(", ")' <<<"$j")" \
				"$k: expired false, acquired true"
			one_end "$j"
			run -0 --separate-stderr rlock -u "$u" -k "$k" --history
			[[ ${lines[0]} == *expired*dies*'no end recorded'* ]] || fail "$k: ${lines[0]}"
			# the next acquisition records it: still one end
			# shellcheck disable=SC2086
			run -0 rlock -u "$u" -k "$k" $m --label next -- true
			j=$(rlock -u "$u" -k "$k" --history --json -n 1000)
			assert_equal "$k: $(jq -r '[.entries[] | select(.label == "dies") | "\(.event) \(.recorded)"] | join(", ")' <<<"$j")" \
				"$k: expired true, acquired true"
			one_end "$j"
		done
	done
}

@test "history: an open run whose --preempt reservation was withdrawn reads as ended; a leftover 'from' without the hand-over keeps nothing open" {
	# the run a preempted holder's release left open, its reservation gone (a withdrawn
	# request left 'from' behind): --history read it as still kept, no end shown
	local t=0123456789abcdef0123456789abcdef
	rcli XADD 'rlock:{wd}:history' '*' ev acquired fence 1 token "$t" >/dev/null
	printf '%s\0' 1 "$t" h 42 u '' 100 60000 s0 | rcli -x SET 'rlock:{wd}:history:run' >/dev/null
	rcli HSET 'rlock:{wd}:preempt' from "$t" fstatus 0 >/dev/null
	rcli PEXPIRE 'rlock:{wd}:preempt' 60000 >/dev/null
	run -0 --separate-stderr rlock -k wd --history --json
	assert_equal "$(jq -r '[.entries[] | "\(.event) \(.recorded)"] | join(", ")' <<<"$output")" \
		"released false, acquired true"
	# kept by a live reservation (handover 1): still open, no end
	rcli HSET 'rlock:{wd}:preempt' handover 1 token "$t" >/dev/null
	run -0 --separate-stderr rlock -k wd --history --json
	assert_equal "$(jq -r '[.entries[].event] | join(" ")' <<<"$output")" "acquired"
}

# holds_again PORT NAME: the node on PORT holds NAME's lock (the renewal locked it again).
holds_again() { [[ $(redis-cli -p "$1" EXISTS "rlock:{$2}") == 1 ]]; }

@test "history over three Redlock nodes: after a rolling restart under a holder, each of its run's records says the fence it got, not a node's own count" {
	local p ports fence
	read -ra ports <<<"$NODE_PORTS"
	for p in "${ports[@]}"; do
		redis-cli -p "$p" SET 'rlock:{roll}:fence' 5 >/dev/null
	done
	# the third node restarted empty: it counts 1, the merge raises its counter to 6
	redis-cli -p "${ports[2]}" FLUSHALL >/dev/null
	rlock_bg -u "$NODES" -t 3s -k roll -- sh -c 'echo "$RLOCK_FENCE" >fence; touch p.started; i=0; while [ ! -e go ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done'
	wait_until 30 test -e p.started
	fence=$(cat fence)
	assert_equal "$fence" 6
	# then the other two, one at a time, each locked again by the renewal first: only
	# the third node keeps the run's acquired record
	for p in "${ports[1]}" "${ports[0]}"; do
		redis-cli -p "$p" FLUSHALL >/dev/null
		wait_until 20 holds_again "$p" roll
	done
	touch go
	rlock_wait
	((RLOCK_STATUS == 0))
	run -0 rlock -u "$NODES" -k roll --history
	echo "$output"
	[[ $output == *"acquired    fence $fence "* ]] || fail "the acquired record's fence is not the run's"
	[[ $output == *"released    fence $fence "* ]] || fail "the released record's fence is not the run's"
}

@test "one JSON escape for every --json output: a label with UTF-8, a control byte, a byte that is not UTF-8, a quote, a backslash and a slash reads the same in --status, --list and --history" {
	local label want
	label=$(printf 'j\xc3\xa9\xe2\x9c\x93\x01\xff"\\/x')
	printf 'history = 10\n' >h.conf
	RLOCK_CONFIG=$PWD/h.conf rlock -k hj --label "$label" -- sh -c \
		'"$0" -k hj --status --json >st.json; "$0" --list --json >li.json; exit 0' "$RLOCK"
	want='"label":"jé✓\u0001\ufffd\"\\/x"'
	# the label's JSON text, byte for byte, in each output (grep -F: no pattern)
	grep -qF "$want" st.json || fail "--status: $(cat st.json)"
	grep -qF "$want" li.json || fail "--list: $(cat li.json)"
	RLOCK_CONFIG=$PWD/h.conf run -0 --separate-stderr rlock -k hj --history --json
	[[ $(grep -oF "$want" <<<"$output" | wc -l) == 2 ]] || fail "--history: $output"
	assert_equal "$(jq -r '.label' st.json)" "$(printf 'j\xc3\xa9\xe2\x9c\x93\x01\xef\xbf\xbd"\\/x')"
}

@test "history: a command that cannot run (127, 126) ends released with that status, as its exit and its events line say" {
	run -127 rlock -k nr --label nf --events ev.jsonl -- "$BATS_TEST_TMPDIR/no-such-command"
	assert_equal "$(runs_of nr nf)" 'acquired null
released 127'
	[[ $(jq -r 'select(.event == "released") | .status' ev.jsonl) == 127 ]]
	: >not-exec
	run -126 rlock -k nr --label nx -- "$BATS_TEST_TMPDIR/not-exec"
	assert_equal "$(runs_of nr nx)" 'acquired null
released 126'
}

# keeper_end NAME: the status on NAME's newest history record if it is released (else
# nothing): what the keeper's end wrote.
keeper_end() {
	rlock -k "$1" --history --json -n 1 | jq -er '.entries[0] | select(.event == "released") | .status'
}

@test "history: a keeper's end records the status its events line says (--release, SIGTERM, --max-hold)" {
	local pid
	eval "$(rlock -k kr --acquire)"
	run -0 rlock -k kr --release --events ev
	assert_equal "$(jq -r 'select(.event == "keeper-released") | .status' ev)" 0
	assert_equal "$(keeper_end kr)" 0
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
	eval "$(rlock -k kt --acquire --events ev2)"
	pid=$(rlock -k kt --status --json | jq -r .pid)
	kill -TERM "$pid"
	wait_until 5 keeper_end kt
	assert_equal "$(keeper_end kt)" 0
	assert_equal "$(jq -r 'select(.event == "keeper-released") | .status' ev2)" 0
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
	eval "$(rlock -k km --acquire --max-hold 200ms --events ev3)"
	wait_until 5 keeper_end km
	assert_equal "$(keeper_end km)" 124
	wait_until 5 grep -q keeper-released ev3
	assert_equal "$(jq -r 'select(.event == "keeper-released") | .status' ev3)" 124
}
