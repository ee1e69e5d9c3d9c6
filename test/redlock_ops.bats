#!/usr/bin/env bats
# Redlock, part two: what the operator sees and does when the nodes disagree (a node
# paused or degraded under --status, --list, --release and --history), split votes,
# --break, --preempt, inherited variables and stray keys. Part one is redlock.bats;
# the nodes and their helpers are in redlock.bash.

# shellcheck disable=SC2154,SC2016,SC2153  # bats sets $stderr; $RLOCK_* expand in the command; RLOCK_ERR from rlock_bg
load helpers
load redlock

@test "one of 3 nodes down: the quorum holds, and says it is degraded in one line naming the node (not under -q)" {
	local three
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	node_kill 1
	run -0 --separate-stderr rlock -u "$three" -k g -- echo ran
	assert_output ran
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^rlock: Redlock degraded: rlock:\{g\} held by 2 of 3 nodes; missing: 127\.0\.0\.1:$(node_port 1) \(connect to 127\.0\.0\.1:$(node_port 1): Connection refused\)$"
	run -0 --separate-stderr rlock -q -u "$three" -k g -- echo ran
	assert_equal "$stderr" ""
	# all nodes up: nothing said
	node_start 1
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	run -0 --separate-stderr rlock -u "$three" -k g -- echo ran
	assert_equal "$stderr" ""
}

@test "--status and --list of a lock held by 3 of 5 nodes, one of them paused: cannot tell (69; --list: in the name's row), never 'free'" {
	node_kill 3
	node_kill 4
	# a long lease: its renewal (ttl/3) does not lock the restarted nodes meanwhile
	rlock_bg -t 120s -k s -- "$HOLD" h
	wait_until 10 test -e h.started
	node_start 3
	node_start 4
	[[ $(keys_left s) == 3 ]]
	node_pause 2
	run -75 rlock -n -k s -- true # what an acquire finds: busy
	run -69 --separate-stderr rlock --status -k s
	assert_output ''
	assert_regex "$stderr" "^rlock: cannot tell whether rlock:\{s\} is held: 2 of 5 Redlock nodes have its holder, 1 did not answer \(3 needed\)"
	run -69 --separate-stderr rlock --status --json -k s
	assert_output ''
	# --list: the whole listing, the name's row says it cannot tell (never a free name
	# left out), 69
	run -69 --separate-stderr rlock --list
	assert_line --index 1 --regexp '^s +- +- +- +- +\[cannot tell: 2 of 5 Redlock nodes have its holder, 1 did not answer \(3 needed\)\]$'
	[[ ${#lines[@]} == 2 ]]
	assert_regex "$stderr" "^rlock: --list: cannot tell whether rlock:\{s\} is held: 2 of 5 Redlock nodes have its holder"
	run -69 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | [.name, .held, .cannot_tell]]' <<<"$output")" '[["s",null,"2 of 5 Redlock nodes have its holder, 1 did not answer (3 needed)"]]'
	# --held of the holder's token says why it cannot tell (not "no quorum" of 4 that
	# answered)
	run -69 --separate-stderr rlock -k s --token "$(env_of h RLOCK_TOKEN)" --held
	assert_regex "$stderr" "cannot tell whether rlock:\{s\} is held: 2 of 5 Redlock nodes have the token, 1 did not answer \(3 needed\)"
	node_resume 2
	run -0 rlock -k s --token "$(env_of h RLOCK_TOKEN)" --held
	run -75 rlock --status -k s
	assert_output --partial 'nodes    5 of 5 Redlock nodes answered'
	run -0 rlock --list --json
	assert_output --partial '"name":"s"'
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 0))
	run -0 rlock --status -k s
}

@test "--release of an --acquire'd lock on 3 of 5 nodes, one paused: given back where nodes answer, 0 and a warning naming the silent one; never 'cannot release'" {
	local rt=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$rt"
	node_kill 3
	node_kill 4
	# a long lease: its renewal (ttl/3) does not lock the restarted nodes meanwhile
	XDG_RUNTIME_DIR=$rt rlock -k kr --acquire -t 120s >vars.sh
	local pid
	pid=$(node_cli 0 HGET 'rlock:{kr}:owner' pid)
	track_pid "$pid"
	node_start 3
	node_start 4
	[[ $(keys_left kr) == 3 ]]
	node_pause 2
	XDG_RUNTIME_DIR=$rt run -0 --separate-stderr bash -c ". ./vars.sh && '$RLOCK' -k kr --release"
	assert_regex "$stderr" 'released rlock:\{kr\} on the 4 of 5 Redlock nodes that answered; 1 did not and may keep it until its TTL, fewer than a majority: 127.0.0.1:[0-9]+ \('
	wait_until 10 proc_gone "$pid"
	# given back on every node that answered: the lock is free for another run
	local i
	for i in 0 1 3 4; do
		[[ $(node_cli "$i" EXISTS 'rlock:{kr}') == 0 ]]
	done
	run -0 rlock -n -k kr -- true
	node_resume 2
}

@test "a run's release with its lock on 3 of 5 nodes, one paused: given back where nodes answer, says so, never 'cannot release'; the command's status" {
	node_kill 3
	node_kill 4
	rlock_bg -t 120s --io-timeout 500ms -k kq -- "$HOLD" h
	local holder=$RLOCK_PID herr=$RLOCK_ERR
	wait_until 10 test -e h.started
	node_start 3
	node_start 4
	[[ $(keys_left kq) == 3 ]]
	node_pause 2
	touch h.release
	rlock_wait "$holder" 60
	((RLOCK_STATUS == 0))
	run -1 grep -c 'cannot release' "$herr"
	# SIGSTOPped: waited for up to --io-timeout, then said until when
	grep -Eq 'released rlock:\{kq\} on the 4 of 5 Redlock nodes that answered; 1 did not and may keep it until its TTL ends \(in at most 1[01][0-9]\.[0-9] s\), fewer than a majority: 127\.0\.0\.1:[0-9]+ \(127\.0\.0\.1:[0-9]+ did not answer within [0-9]+ ms\)' "$herr" || fail "$(cat "$herr")"
	local i
	for i in 0 1 3 4; do
		[[ $(node_cli "$i" EXISTS 'rlock:{kq}') == 0 ]]
	done
	run -0 rlock -n -k kq -- true
	node_resume 2
}

@test "a run's release that a node under CLIENT PAUSE WRITE holds back: waited for up to --io-timeout (released there when the pause ends in time); past it, one line names the node and the TTL left; the command's status" {
	# Redis holds a paused client's write back, and drops it with the connection: the
	# release was given up after --node-timeout and the node kept the lock for its TTL.
	local p2
	p2=$(node_port 2)
	run -3 --separate-stderr rlock -t 30s -k cw -- sh -c "redis-cli -p $p2 CLIENT PAUSE 600 WRITE >/dev/null; exit 3"
	assert_equal "$(node_cli 2 EXISTS 'rlock:{cw}')" 0
	assert_equal "$(keys_left cw)" 0
	[[ $stderr != *'may keep it'* ]] || fail "$stderr"
	# a pause longer than --io-timeout: released on the others, the line says until when:
	# the lease left, less than its 30 s and more than the 20 s a renewal (at ttl/3)
	# would leave; how much less than 30 depends on the machine's speed (the drift
	# allowance, the command, the 300 ms waited: 29.3 s here, under 29 s when slower)
	run -0 --separate-stderr rlock -t 30s --io-timeout 300ms -k cx -- redis-cli -p "$p2" CLIENT PAUSE 1500 WRITE
	assert_regex "$stderr" "released rlock:\{cx\} on the 4 of 5 Redlock nodes that answered; 1 did not and may keep it until its TTL ends \(in at most 2[0-9]\.[0-9] s\), fewer than a majority: 127\.0\.0\.1:$p2 \("
	assert_equal "$(grep -c . <<<"$stderr")" 1
	node_cli 2 CLIENT UNPAUSE >/dev/null
	# SIGSTOPped before the renewal's handle (the release's) ever reached it: a node the
	# run reached once (its acquire) is named all the same
	run -0 --separate-stderr rlock -t 900ms --io-timeout 300ms -k cs -- sh -c "kill -STOP $(node_pid 2); sleep 0.7"
	node_resume 2
	assert_regex "$stderr" "released rlock:\{cs\} on the 4 of 5 Redlock nodes that answered; 1 did not and may keep it until its TTL ends \(in at most [0-9.]+ s\), fewer than a majority: 127\.0\.0\.1:$p2 \("
}

@test "a node paused for writes under a run's renewals: the connection that owes them is replaced without a second round on a fresh one, so the renewal confirms with the others in time (not 79)" {
	# Each renewal waits --node-timeout for the paused node; after SKIP_MAX unanswered
	# its connection was replaced, and the renewal was "retried on a fresh connection"
	# (as for one closed while idle): a second node timeout, past the lease's 4/5.
	local p2
	p2=$(node_port 2)
	run -0 --separate-stderr rlock -vv -t 400ms --node-timeout 100ms -k rp -- sh -c "redis-cli -p $p2 CLIENT PAUSE 1500 WRITE >/dev/null; sleep 1.8"
	[[ $stderr == *'its connection is replaced'* ]] || fail "no connection replaced: $stderr"
	[[ $stderr != *'retrying on fresh connections'* ]] || fail "$stderr"
}

@test "a waiter listens where the holder is: a node that granted it (split vote) and was given back never wakes it; the holder's release does" {
	# 3 nodes; the holder has 0 and 1 (node 2 was down), node 2 restarted empty and
	# reached through a proxy that delays its replies, so that it answers the waiter's
	# attempts last: the waiter is busy on 0 and 1, granted on 2 and gives 2 back
	local u0 u1 i
	u0=redis://127.0.0.1:$(node_port 0) u1=redis://127.0.0.1:$(node_port 1)
	node_kill 2
	rlock_bg -t 120s -u "$u0,$u1,redis://127.0.0.1:$(node_port 2)" -k sv -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	node_start 2
	delay_proxy_start 30 "$(node_port 2)"
	rlock_bg -vv -w 60s --node-timeout 2s -u "$u0,$u1,$PROXY_URL" -k sv -- "$HOLD" w
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$werr"
	# three attempts granted on node 2 (each counts its fence) and given back: none
	# of those give-backs is a release of the lock, none wakes the waiter
	wait_until 30 counted_past 2 'rlock:{sv}:fence' 3
	run -1 grep -c 'woken by the release notification' "$werr"
	assert_output 0
	[[ ! -e w.started ]]
	touch h.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	wait_until 30 test -e w.started
	grep -q 'woken by the release notification' "$werr"
	touch w.release
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
}

@test "nodes refusing AUTH that the quorum can do without: -w waits for the others (a paused node); refusing a majority: 69 at once" {
	local i list='' pw
	for ((i = 0; i < N; i++)); do
		pw=s3cret
		((i < 2)) && pw=other # nodes 0 and 1 refuse rlock's password
		node_cli "$i" ACL SETUSER rl on ">$pw" '~*' '&*' '+@all' >/dev/null
		list+=${list:+,}redis://rl@127.0.0.1:$(node_port "$i")
	done
	node_pause 4 # 2 of the 3 others answer: no quorum until it resumes
	export RLOCK_PASSWORD=s3cret
	rlock_bg -w 60s -u "$list" -k pa -- touch ran
	wait_until 30 grep -q 'retrying for up to' "$RLOCK_ERR"
	proc_alive "$RLOCK_PID"
	node_resume 4
	rlock_wait "$RLOCK_PID" 60
	((RLOCK_STATUS == 0))
	[[ -e ran ]]
	grep -q 'Redlock degraded' "$RLOCK_ERR"
	# a third node refuses it: no quorum can form whatever the wait, at once
	rm ran
	node_cli 2 ACL SETUSER rl resetpass '>other' >/dev/null
	local t0
	t0=$(now_ms)
	run -69 --separate-stderr rlock -w 60s -u "$list" -k pa -- touch ran
	(($(now_ms) - t0 < 20000))
	[[ ! -e ran ]]
	assert_regex "$stderr" 'wrong user name or password'
	# so too a script refused by the ACL (NOPERM) on a majority
	for i in 0 1 2; do
		node_cli "$i" ACL SETUSER rl resetpass '>s3cret' -evalsha -eval >/dev/null
	done
	t0=$(now_ms)
	run -69 --separate-stderr rlock -w 60s -u "$list" -k pa -- touch ran
	(($(now_ms) - t0 < 20000))
	[[ ! -e ran ]]
	assert_regex "$stderr" 'NOPERM'
	for ((i = 0; i < N; i++)); do
		node_cli "$i" ACL DELUSER rl >/dev/null
	done
}

@test "--history of a run that a node granted in split attempts first: one run, its RLOCK_FENCE, never 'released' while it runs" {
	# 3 nodes; the holder has 0 and 1 (node 2 was down): the waiter's attempts are
	# granted by node 2 alone and given back (each one counts node 2's fence) until
	# the holder releases; then its run is granted by all three, with node 2's count
	local three i
	node_kill 2
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -t 120s -u "$three" -k hp -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	node_start 2
	rlock_bg -w 60s -u "$three" -k hp -- "$HOLD" w
	local waiter=$RLOCK_PID
	wait_until 30 counted_past 2 'rlock:{hp}:fence' 3
	touch h.release
	rlock_wait "$holder"
	wait_until 30 test -e w.started
	local fence
	fence=$(env_of w RLOCK_FENCE)
	((fence >= 4)) # node 2's count, past nodes 0 and 1's
	run -0 rlock -u "$three" --history --json -k hp
	local wtok
	wtok=$(env_of w RLOCK_TOKEN)
	# the waiter's run: acquired once, with its own fence, and not released yet
	[[ $(grep -o "\"token\":\"$wtok\"" <<<"$output" | wc -l) == 1 ]]
	assert_output --partial "\"event\":\"acquired\",\"fence\":$fence,\"token\":\"$wtok\""
	touch w.release
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
	run -0 rlock -u "$three" --history --json -k hp
	[[ $(grep -o "\"token\":\"$wtok\"" <<<"$output" | wc -l) == 2 ]]
	assert_output --partial "\"event\":\"released\",\"fence\":$fence,\"token\":\"$wtok\""
}

@test "--history: a waiter that gave up after split attempts (granted by one node, given back) is no run" {
	# 3 nodes; the holder has 0 and 1 (node 2 was down): the waiter's attempts are
	# granted by node 2 alone and given back until its -w runs out (75)
	local three
	node_kill 2
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -t 120s -u "$three" -k hg -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	node_start 2
	run -75 rlock -w 3s -u "$three" -k hg --label gaveup -- true
	(($(node_cli 2 GET 'rlock:{hg}:fence') >= 1)) # node 2 granted its attempts
	run -0 rlock -u "$three" --history --json -k hg
	refute_output --partial gaveup
	touch h.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	run -0 rlock -u "$three" --history --json -k hg
	refute_output --partial gaveup
	# the holder's run: acquired and released
	[[ $(jq -r '[.entries[].event] | join(" ")' <<<"$output") == 'released acquired' ]]
}

@test "a split vote: the waiter retries after a short random delay (50-250 ms, as redsync), never growing with its backoff, never at once on its own give-back's notification (no spin while another holds)" {
	# 3 nodes; the holder has all three; the waiter listens on node 0. Node 0 then
	# loses the key (evicted): each attempt is granted there and busy on 1 and 2, a
	# split vote, whose give-back on node 0 publishes the release the waiter hears
	local three
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -t 120s -u "$three" -k sp -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	rlock_bg -vv -w 60s -u "$three" -k sp -- touch w.ran
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$werr"
	node_cli 0 DEL 'rlock:{sp}' 'rlock:{sp}:owner' >/dev/null
	# six splits in a row: a pause that grew with them (the waiter's backoff) was
	# 2.5-5 s by then; each is 50-250 ms
	wait_until 30 split_count "$werr" 6 || fail "no split votes: $(cat "$werr"; node_cli 0 KEYS "*")"
	# the time the next six take (not a count in a fixed window: how many fit depends
	# on the machine's speed): at least the five whole pauses between them (50 ms each
	# at least: never one per round trip), at most six of 250 ms and their attempts
	# (1 s here; a slow machine's attempts take longer, not its pauses), well under six
	# pauses that grew with the backoff (10 s here)
	local t0 n0 n
	t0=$(now_ms) n0=$(grep -c 'split vote' "$werr")
	wait_until 30 split_count "$werr" $((n0 + 6)) || fail "no six more split votes: $(tail -5 "$werr")"
	n=$(($(now_ms) - t0))
	echo "# six split votes after the sixth: $n ms" >&3
	((n >= 5 * 50 && n < 4000)) || fail "six split votes in $n ms: $(tail -5 "$werr")"
	[[ ! -e w.ran ]]
	# -vv says no release woke it: none came (its own give-backs are no release)
	run -1 grep -c 'woken by the release notification' "$werr"
	# the listener left node 0 (which the holder no longer has, and where its release
	# is not published): the release is heard
	t0=$(now_ms)
	touch h.release
	wait_until 30 test -e w.ran
	n=$(($(now_ms) - t0))
	((n < 1500)) || fail "the waiter took $n ms after the release: $(tail -5 "$werr")"
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
}

@test "a split vote's pause ends at the holder's release (woken by it, within a round trip), not at its end" {
	# 3 nodes; the holder has 0 and 1 (node 2 was down), node 2 restarted empty: the
	# waiter's attempts are granted by node 2 alone and given back. The holder's
	# release, heard on node 0, ends a pause at once (-vv says it woke the waiter).
	local three
	node_kill 2
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -t 120s -u "$three" -k ph -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	node_start 2
	rlock_bg -vv -w 60s -u "$three" -k ph -- touch w.ran
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 split_count "$werr" 6
	local t0 took
	t0=$(now_ms)
	touch h.release
	wait_until 30 test -e w.ran
	took=$(($(now_ms) - t0))
	echo "# hand-off after the holder's release: $took ms; splits: $(grep -c 'split vote' "$werr")" >&3
	((took < 1500)) || fail "the waiter took $took ms after the release: $(tail -5 "$werr")"
	grep -q 'woken by the release notification' "$werr"
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
}

@test "--history: a run stopped by a signal during its attempt (granted, a reply on its way) is no run: its give-back leaves no acquired/released pair" {
	# 3 nodes, node 2 behind a proxy that holds each reply 5 s: the attempt runs on
	# every node (each writes its acquired record), nodes 0 and 1 answer, and SIGTERM
	# comes while node 2's reply is on its way
	local i three list
	delay_proxy_start 5000 "$(node_port 2)"
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	list="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),$PROXY_URL"
	run -0 rlock -u "$three" -k sg -- true # scripts loaded: the attempt is one round
	rlock_bg -w 30s -t 60s -u "$list" --node-timeout 20s -k sg --label stopped -- touch ran
	local r=$RLOCK_PID
	for i in 0 1 2; do
		wait_until 30 newest_has "$i" sg stopped
	done
	kill -TERM "$r"
	rlock_wait "$r" 30
	[[ ! -e ran ]]
	run -0 rlock -u "$three" --history --json -k sg
	refute_output --partial stopped
}

@test "a node that lost the lock (restarted empty, or its key deleted) and was locked again by the renewal: --status, --list and --history show the holder (host, pid, command, its RLOCK_FENCE), never 'pid 0', '?' or the relock's count" {
	local pid fence token
	run -0 rlock -k m -- true
	rlock_bg -t 3s -k m -- "$HOLD" h # fence 2
	pid=$RLOCK_PID
	wait_until 10 test -e h.started
	token=$(env_of h RLOCK_TOKEN)
	fence=$(env_of h RLOCK_FENCE)
	assert_equal "$fence" 2
	# node 0 (the first URL) restarted empty, node 1's key deleted (its counter kept:
	# the relock counts 3 there)
	node_kill 0
	node_start 0
	node_cli 1 DEL 'rlock:{m}' >/dev/null
	wait_until 10 node_has 0 'rlock:{m}' "$token"
	wait_until 10 node_has 1 'rlock:{m}' "$token"
	run -75 rlock -k m --status
	assert_line --regexp "^  pid +$pid\$"
	assert_line --regexp "^  fence +$fence\$"
	refute_output --partial '?'
	run -75 rlock -k m --status --json
	assert_output --partial "\"pid\":$pid,"
	assert_output --partial "\"fence\":$fence,"
	refute_output --partial '"host":null'
	run -0 rlock --list
	assert_line --regexp "^m +[^ ]+ +$pid "
	run -75 --separate-stderr rlock -n -k m -- true
	[[ $stderr == *"held by "*" pid $pid"* ]] || fail "the busy line: $stderr"
	touch h.release
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 0
	run -0 rlock -k m --history --json
	refute_output --partial '"pid":0'
	refute_output --partial '"host":null'
	refute_output --partial '"fence":3'
	run -0 rlock -k m --history
	assert_line --index 0 --regexp "released +fence $fence +[^ ]+ pid $pid +status 0"
}

# hold_on NAME TOKEN PID NODE...: the lock of NAME held by TOKEN on those nodes, as an
# acquire writes it (the key, the holder's record), for a minute.
hold_on() {
	local name=$1 tok=$2 pid=$3 i
	shift 3
	for i in "$@"; do
		node_cli "$i" SET "rlock:{$name}" "$tok" PX 60000 >/dev/null
		node_cli "$i" HSET "rlock:{$name}:owner" host h pid "$pid" fence 1 >/dev/null
		node_cli "$i" PEXPIRE "rlock:{$name}:owner" 60000 >/dev/null
	done
}

@test "--break over nodes that disagree names what each node removed: the token compared, every token of a plain break; --status merges the nodes' break records (the newest break, every token)" {
	local a=0123456789abcdef0123456789abcdef b=fedcba9876543210fedcba9876543210
	hold_on d "$a" 101 0 1 2
	hold_on d "$b" 202 3
	# --token B: broken on the node it holds, and named; A (a majority) stays and is not
	# said to be broken
	run -0 --separate-stderr rlock -k d --break --token "$b"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^rlock: broke rlock:\{d\}: token $b, held by h pid 202"
	node_has 0 'rlock:{d}' "$a"
	node_has 2 'rlock:{d}' "$a"
	[[ $(keys_left d) == 3 ]]
	# a plain break: every holder removed, each named once
	hold_on d "$b" 202 3
	run -0 --separate-stderr rlock -k d --break
	assert_equal "${#stderr_lines[@]}" 2
	assert_regex "${stderr_lines[0]}" "^rlock: broke rlock:\{d\}: token $a, held by h pid 101"
	assert_regex "${stderr_lines[1]}" "^rlock: broke rlock:\{d\}: token $b, held by h pid 202"
	[[ $(keys_left d) == 0 ]]
	# --status tells that break as the nodes do together: both tokens (node 0's record
	# names a alone, node 3's b alone), not the first node's record
	run -0 --separate-stderr rlock -k d --status --json
	assert_equal "$(echo "$output" | jq -c '.broken.tokens | sort')" "$(jq -nc --arg a "$a" --arg b "$b" '[$a, $b] | sort')"
	# a node that missed the newest break (paused) keeps an older record: --status shows
	# the newest break, not node 0's older one
	hold_on d "$a" 303 0 1 2 3 4
	run -0 --separate-stderr rlock -u "redis://127.0.0.1:$(node_port 0)" -k d --break --label old
	node_pause 0
	run -0 --separate-stderr rlock --node-timeout 1s -k d --break --label new
	node_resume 0
	run -0 --separate-stderr rlock -k d --status --json
	assert_equal "$(echo "$output" | jq -r '.broken.label')" new
	run -0 --separate-stderr rlock -k d --status
	assert_regex "$output" "broken .* \[new\]: token "
}

@test "--preempt during a --preemptible holder's min-hold keep takes the lock on every node at once; a plain waiter waits the keep out" {
	printf 'min-hold = 60s\n' >keep.conf
	run -0 rlock --config keep.conf -k p --preemptible -- true
	assert_equal "$(keys_left p)" "$N"
	run -75 rlock -k p -w 300ms -- true
	local t0
	t0=$(now_ms)
	run -0 rlock -k p --preempt -w 20s -c 'echo "$RLOCK_FENCE" >fence'
	(($(now_ms) - t0 < 10000)) || fail "waited $(($(now_ms) - t0)) ms for a keep"
	assert_equal "$(cat fence)" 2
	assert_equal "$(keys_left p)" 0
}

# renewed_or_gone FILE N PID: rlock -vv's log FILE says "renewed" at least N times, or
# that rlock (PID) has exited
renewed_or_gone() { (($(grep -c '^rlock: renewed ' "$1") >= $2)) || ! proc_alive "$3"; }

@test "--preemptible: one node's --preempt mark (stale, hostile, cut off) stops nothing; a request that marks a majority stops it (81)" {
	rlock_bg -vv -k p -t 3s --preemptible -- "$HOLD" h
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 10 test -e h.started
	# a mark on one node of five, as acquire.lua writes it, that outlives the test
	node_cli 0 HSET 'rlock:{p}:preempt' token stale host evil pid 4242 label x >/dev/null
	node_cli 0 PEXPIRE 'rlock:{p}:preempt' 60000 >/dev/null
	# and on a second: two of five are still no majority
	node_cli 1 HSET 'rlock:{p}:preempt' token stale host evil pid 4242 label x >/dev/null
	node_cli 1 PEXPIRE 'rlock:{p}:preempt' 60000 >/dev/null
	# three renewals (ttl/3 each) read the marks
	wait_until 20 renewed_or_gone "$h_err" 3 "$h_pid"
	proc_alive "$h_pid" || fail "stopped by a minority's mark: $(cat "$h_err")"
	run ! grep -q 'preempted' "$h_err"
	# a real request marks every node: the holder stops and exits 81 once it took it
	rlock_bg -k p -t 3s --preempt -w 30s --label hotfix -- true
	local r_pid=$RLOCK_PID
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 81
	grep -q "preempted by .*\[hotfix\]" "$h_err" || fail "$(cat "$h_err")"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 0
}

@test "a preempted holder whose request took the hand-over on one node only (a split vote's grant, a stale node): not 81, the command's own status" {
	cat >job <<'EOF2'
#!/bin/sh
trap 'touch h.trapped; i=0; while [ ! -e h.go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done; exit 3' TERM
touch h.started
i=0
while [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
EOF2
	chmod +x job
	rlock_bg -k p -t 3s --preemptible -- ./job
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 10 test -e h.started
	# a long lease: its mark, renewed by each attempt, lives 5 s after the last one
	rlock_bg -k p -t 30s --preempt -w 60s -- true
	local r_pid=$RLOCK_PID
	wait_until 20 test -e h.trapped
	kill -STOP "$r_pid" # alive, but it takes nothing any more
	touch h.go
	# the holder's release kept the name for the request on every node
	local i
	for ((i = 0; i < N; i++)); do
		wait_until 10 node_has_field "$i" handover 1
	done
	# node 0 says the request took it there; the other nodes' reservations end untaken
	local tok
	tok=$(node_cli 0 HGET 'rlock:{p}:preempt' token)
	node_cli 0 HDEL 'rlock:{p}:preempt' token handover >/dev/null
	node_cli 0 HSET 'rlock:{p}:preempt' taken "$tok" thost h tpid 1 tlabel x >/dev/null
	node_cli 0 PEXPIRE 'rlock:{p}:preempt' 60000 >/dev/null
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 3
	run ! grep -q 'exiting 81' "$h_err"
	kill -KILL "$r_pid"
	rlock_wait "$r_pid" 10
}

# preempt_marks NAME: how many nodes hold NAME's --preempt record
preempt_marks() {
	local i n=0
	for ((i = 0; i < N; i++)); do
		[[ $(node_cli "$i" EXISTS "rlock:{$1}:preempt") == 1 ]] && n=$((n + 1))
	done
	echo "$n"
}

@test "--preempt that gives up (-w) withdraws its request on every node: the holder is not stopped later (as on one server)" {
	rlock_bg -vv -k p -t 6s --preemptible -- "$HOLD" h
	local h_pid=$RLOCK_PID h_err=$RLOCK_ERR
	wait_until 10 test -e h.started
	run -75 --separate-stderr rlock -k p --preempt -t 30s -w 300ms -- true
	assert_equal "$(preempt_marks p)" 0
	# its mark would have lived 5 s: two renewals (ttl/3 each) pass, the command runs on
	local seen
	seen=$(grep -c '^rlock: renewed ' "$h_err" || true)
	wait_until 20 renewed_or_gone "$h_err" $((seen + 3)) "$h_pid"
	proc_alive "$h_pid" || fail "stopped for a request that gave up: $(cat "$h_err")"
	touch h.release
	rlock_wait "$h_pid" 30
	assert_equal "$RLOCK_STATUS" 0
}

@test "a paused node that owes a waiter's attempts: the connection is kept until the attempt's give-back is queued behind them, the release's text once (under 48 KiB), so that the node, resumed, holds no grant of a waiter that left" {
	# 3 nodes; the holder has all three, the waiter connects to all three; then node 2
	# loses the key and is paused: each attempt is busy on 0 and 1, unanswered on 2,
	# and given back. A connection that owed more than 4 replies was replaced after
	# the third attempt, before that attempt's give-back: resumed, node 2 ran the
	# attempt and held the waiter's grant for its ttl, the waiter long gone.
	local three
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -t 60s -u "$three" -k ow -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	rlock_bg -vv -t 60s -w 3s --node-timeout 100ms -u "$three" -k ow -- true
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 10 grep -q 'listening for the release' "$werr"
	local fence
	fence=$(node_cli 2 GET 'rlock:{ow}:fence')
	node_cli 2 DEL 'rlock:{ow}' 'rlock:{ow}:owner' >/dev/null
	node_pause 2
	rlock_wait "$waiter"
	((RLOCK_STATUS == 75)) || fail "waiter: $RLOCK_STATUS: $(tail -5 "$werr")"
	node_resume 2
	# a resumed Redis runs only the first 128-160 KiB a closed connection had queued:
	# the release's text goes once per connection (it went again whole, 35 KiB, behind
	# each give-back's SHA: 82 KiB), so that every give-back is well inside that
	local max
	max=$(grep -o '[0-9]* bytes queued' "$werr" | sort -n | tail -1)
	[[ -n $max ]] || fail "no connection replaced: $(cat "$werr")"
	((${max%% *} <= 49152)) || fail "queued on one connection: $max"
	# node 2 runs what it was sent: at least two of the waiter's attempts (each
	# counts its fence), each followed by its give-back
	wait_until 10 counted_past 2 'rlock:{ow}:fence' $((fence + 2))
	assert_equal "$(node_cli 2 EXISTS 'rlock:{ow}')" 0
	touch h.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
}

@test "a release a paused node answers late, its scripts flushed there (NOSCRIPT): sent again whole (EVAL) right behind, it runs when the node wakes; the node keeps no lock of a run that ended" {
	# The command flushes node 2's scripts (an operator's SCRIPT FLUSH) and stops it:
	# the release, sent by its SHA, goes unanswered; node 2, resumed, answered it
	# NOSCRIPT, a reply owed and dropped: the release never ran there, and node 2 kept
	# the ended run's lock for the rest of its ttl.
	local p2 pid2
	p2=$(node_port 2) pid2=$(node_pid 2)
	run -0 --separate-stderr rlock -t 30s --io-timeout 300ms -k nf -- sh -c "redis-cli -p $p2 SCRIPT FLUSH >/dev/null && kill -STOP $pid2"
	node_resume 2
	wait_until 5 no_key 2 'rlock:{nf}' || fail "node 2 keeps the lock: PTTL $(node_cli 2 PTTL 'rlock:{nf}')"
}

# writer_marks NAME: how many nodes hold NAME's writer mark (an exclusive request's, set
# where shared holders or live --fair places make it wait)
writer_marks() {
	local i n=0
	for ((i = 0; i < N; i++)); do
		[[ $(node_cli "$i" EXISTS "rlock:{$1}:writer") == 1 ]] && n=$((n + 1))
	done
	echo "$n"
}
no_key() { [[ $(node_cli "$1" EXISTS "$2") == 0 ]]; } # no_key I KEY
writer_marked() { [[ $(writer_marks "$1") == "$2" ]]; } # writer_marked NAME N

@test "a waiter that gives up (-w, SIGTERM) leaves every node: its writer mark, set where a single-server -s holder is, goes at once (as on one server), not 5 s later; also from a node paused for writes" {
	# node 0 has a single-server shared holder, the Redlock holder the other four: a
	# Redlock waiter's attempts set their writer mark on node 0, which holds back new
	# shared requests there for as long as it lives
	rlock_bg -u "redis://127.0.0.1:$(node_port 0)" -s -k wm -t 30s -- "$HOLD" s
	local s_pid=$RLOCK_PID
	wait_until 10 test -e s.started
	rlock_bg -k wm -t 30s -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 10 test -e h.started
	run -75 --separate-stderr rlock -k wm -t 30s -w 300ms -- true
	assert_equal "$(writer_marks wm)" 0
	rlock_bg -k wm -t 30s -w 60s -- true
	local w_pid=$RLOCK_PID
	wait_until 10 writer_marked wm 1
	kill -TERM "$w_pid"
	rlock_wait "$w_pid"
	assert_equal "$RLOCK_STATUS" 143
	assert_equal "$(writer_marks wm)" 0
	# node 0 paused for writes as the waiter gives up: the leave it holds back (and
	# would drop with the connection) is waited for within the give-up's 500 ms
	rlock_bg -k wm -t 30s -w 60s -- true
	w_pid=$RLOCK_PID
	wait_until 10 writer_marked wm 1
	node_cli 0 CLIENT PAUSE 300 WRITE >/dev/null
	kill -TERM "$w_pid"
	rlock_wait "$w_pid"
	assert_equal "$RLOCK_STATUS" 143
	assert_equal "$(writer_marks wm)" 0
	touch h.release s.release
	rlock_wait "$h_pid"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$s_pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "a waiter that gives up after an outage (69: a majority of the nodes gone) leaves the nodes it reaches: its writer mark goes at once, not 5 s later" {
	rlock_bg -u "redis://127.0.0.1:$(node_port 0)" -s -k wo -t 30s -- "$HOLD" s
	local s_pid=$RLOCK_PID
	wait_until 10 test -e s.started
	rlock_bg -k wo -t 30s -- "$HOLD" h
	wait_until 10 test -e h.started
	rlock_bg -k wo -t 30s -w 1500ms --node-timeout 200ms -- true
	local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 10 writer_marked wo 1
	node_kill 2
	node_kill 3
	node_kill 4
	rlock_wait "$w_pid"
	assert_equal "$RLOCK_STATUS" 69
	assert_equal "$(writer_marks wo)" 0 || fail "$(cat "$w_err")"
	touch s.release
	rlock_wait "$s_pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "a waiter that gives up while a node is paused and owes it several attempts: the leave is queued behind them, so that the node, resumed, keeps no writer mark of a waiter that left" {
	# 3 nodes; a single-server shared holder on node 2 makes each of the waiter's
	# attempts set its writer mark there; the Redlock holder has nodes 0 and 1. Node 2
	# paused: the waiter's attempts go unanswered there; its connection was replaced
	# (more than 4 replies owed) before the give-up's leave, which never reached node 2:
	# resumed, it ran the attempts and kept the writer mark for its 5 s lease.
	local three
	three="redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)"
	rlock_bg -u "redis://127.0.0.1:$(node_port 2)" -s -k lv -t 30s -- "$HOLD" s
	local s_pid=$RLOCK_PID
	wait_until 10 test -e s.started
	rlock_bg -u "$three" -k lv -t 30s -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 10 test -e h.started
	rlock_bg -vv -u "$three" -k lv -t 30s -w 2s --node-timeout 100ms -- true
	local w_pid=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 10 writer_marked lv 1
	node_pause 2
	rlock_wait "$w_pid"
	((RLOCK_STATUS == 75)) || fail "waiter: $RLOCK_STATUS: $(tail -5 "$w_err")"
	node_resume 2
	wait_until 3 no_key 2 'rlock:{lv}:writer' || fail "node 2 keeps the writer mark: PTTL $(node_cli 2 PTTL 'rlock:{lv}:writer'): $(cat "$w_err")"
	touch h.release s.release
	rlock_wait "$h_pid"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$s_pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "Redlock: another lock's stale variables (a --release'd --acquire's) are not passed on to a run's command; a live ancestor's are (--held inside: 0)" {
	eval "$(rlock -k OTHER -n --acquire)"
	run -0 rlock -k OTHER --release
	run -0 rlock -k A -- sh -c 'echo "${RLOCK_KEYS-}" >vars; "$RLOCK" --held; echo "held $?"'
	assert_line 'held 0'
	assert_equal "$(cat vars)" ''
	run -0 rlock -k A -- "$RLOCK" -k B -- sh -c 'echo "$RLOCK_KEYS" >vars; "$RLOCK" --held; echo "held $?"'
	assert_line 'held 0'
	assert_equal "$(cat vars)" 'rlock:{B} rlock:{A}'
}

@test "a stray key of another type on some nodes: the acquire names --reset; --reset deletes it on every node that has one and says it once" {
	local i
	for i in 0 1 2; do node_cli "$i" SADD 'rlock:{sw}:delay' stray >/dev/null; done
	node_cli 3 SADD 'rlock:{sw}:writer' stray >/dev/null
	run -69 --separate-stderr rlock -k sw -n -- true
	assert_regex "$stderr" 'WRONGTYPE.*rlock -k NAME --reset deletes it'
	run -0 --separate-stderr rlock -k sw --reset
	assert_equal "$(grep -c 'deleted rlock:{sw}:delay: it held a set' <<<"$stderr")" 1
	assert_equal "$(grep -c 'deleted rlock:{sw}:writer: it held a set' <<<"$stderr")" 1
	for i in 0 1 2 3; do
		assert_equal "$(node_cli "$i" EXISTS 'rlock:{sw}:delay' 'rlock:{sw}:writer')" 0
	done
	run -0 rlock -k sw -n -- true
}
