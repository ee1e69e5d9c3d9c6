#!/usr/bin/env bats
# Redlock, part one: several --url are independent masters; acquiring, renewing and
# releasing on a quorum with nodes down, paused, blackholed, restarted, behind AUTH
# and TLS, and the fences across them. Part two is redlock_ops.bats; the nodes and
# their helpers are in redlock.bash.

# shellcheck disable=SC2154,SC2016,SC2153  # bats sets $stderr; $RLOCK_* expand in the command; RLOCK_ERR from rlock_bg
load helpers
load redlock

@test "5 nodes: acquired on all, released on all, status shows the quorum" {
	run -0 rlock -k a -- sh -c 'echo "$RLOCK_FENCE" > fence'
	[[ $(cat fence) -ge 1 ]]
	[[ $(keys_left a) == 0 ]]
	rlock_bg -k a -- "$HOLD" h
	wait_until 10 test -e h.started
	[[ $(keys_left a) == 5 ]]
	node_pause 4
	run -75 rlock --status --json -k a
	assert_output --partial '"held":true'
	assert_output --partial '"nodes_ok":4,"nodes_total":5'
	run -0 rlock --list --json # each node has it: listed once
	[[ $(grep -o '"name":"a"' <<<"$output" | wc -l) == 1 ]]
	node_resume 4
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 0))
	[[ $(keys_left a) == 0 ]]
}

@test "--prefix '': a user's {NAME} keys on a majority of nodes are left alone and out of --list (69 naming them, nothing deleted)" {
	local i
	for i in 0 1 2; do node_cli "$i" SET '{ux}' hello >/dev/null; done
	run -0 --separate-stderr rlock --prefix '' --list --json
	assert_equal "$(jq -c .locks <<<"$output")" '[]'
	run -69 --separate-stderr rlock --prefix '' -k ux --break
	assert_regex "$stderr" "break: \\{ux\\} holds a string that rlock did not write .*: left as it is"
	for i in 0 1 2; do assert_equal "$(node_cli "$i" GET '{ux}')" hello; done
}

@test "nodes held by different tokens, none on a majority: --status is not free (75, like an acquire), says so; --list lists it" {
	# Two runs that each got two nodes of five and died (or a split vote's leftovers):
	# no token holds a majority, and only one node is free, so no acquire can get a
	# quorum until these leases end. --status said "free" (exit 0) meanwhile.
	local i
	for i in 0 1; do node_cli "$i" SET 'rlock:{sp}' aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa PX 20000 >/dev/null; done
	for i in 2 3; do node_cli "$i" SET 'rlock:{sp}' bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb PX 20000 >/dev/null; done
	# -n over a split (node 4 grants, the others are busy): 75, one line, and node 4's
	# grant given back before it exits
	run -75 --separate-stderr rlock -k sp -n -- true
	assert_one_line_error
	assert_equal "$(node_cli 4 EXISTS 'rlock:{sp}')" 0
	run -75 --separate-stderr rlock --status -k sp
	assert_line --index 0 --regexp '^rlock:\{sp\} is not free: held on 4 of 5 Redlock nodes by 2 tokens, none on a majority; an acquire is refused until .* \(1[0-9]s left\)'
	run -75 --separate-stderr rlock --status -k sp --json
	assert_equal "$(jq -c '[.held, .split.nodes_held, .split.tokens, (.split.left_ms > 10000), (.split.until_ms > 0)]' <<<"$output")" '[false,4,2,true,true]'
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "sp") | .split.nodes_held]' <<<"$output")" '[4]'
	run -0 --separate-stderr rlock --list
	assert_line --regexp '^sp +- +- +- +1[0-9]s +\[held on 4 of 5 Redlock nodes by 2 tokens, none on a majority\]'
	# one token on 2 nodes, 3 free: an acquire gets a quorum, the name is free
	for i in 2 3; do node_cli "$i" DEL 'rlock:{sp}' >/dev/null; done
	run -0 --separate-stderr rlock --status -k sp --json
	assert_equal "$(jq -c '[.held, .split]' <<<"$output")" '[false,null]'
}

# node_fair_places I NAME N: N live --fair places (their leases a minute, waiters away)
# in NAME's queue on node I, as a single-server --fair run on that node leaves them.
node_fair_places() {
	local i=$1 name=$2 n=$3 k t
	t=$(node_cli "$i" TIME | head -1)
	for ((k = 1; k <= n; k++)); do
		node_cli "$i" ZADD "rlock:{$name}:queue" $(((t * 1000 + k) * 1000)) "tok$k" >/dev/null
		node_cli "$i" ZADD "rlock:{$name}:qlease" $((t * 1000 + 60000)) "tok$k" >/dev/null
		node_cli "$i" HSET "rlock:{$name}:qmeta" "tok$k" "{\"host\":\"h$k\",\"pid\":$((4000 + k))}" >/dev/null
	done
	node_cli "$i" PEXPIRE "rlock:{$name}:queue" 60000 >/dev/null
}

@test "--fair is refused over Redlock (64); fair places a majority of nodes keep (left by single-server runs): --status and --list say so, as on one server" {
	run -64 --separate-stderr rlock --fair -k fq -- true
	assert_regex "$stderr" 'not Redlock'
	local i
	for i in 0 1 2; do node_fair_places "$i" fq 2; done
	run -75 --separate-stderr rlock -n -k fq -- true
	[[ $stderr == "rlock: lock 'fq' is busy: 2 --fair waiters go first" ]] || fail "$stderr"
	run -75 --separate-stderr rlock --status -k fq
	assert_line --index 0 --regexp '^rlock:\{fq\} is free, but 2 --fair waiters go first: a new request waits its turn \(last fence [0-9]+\)$'
	run -75 --separate-stderr rlock --status -k fq --json
	assert_equal "$(jq -c '[.held, .blocked.by, .blocked.waiters, .queue_length]' <<<"$output")" '[false,"fair-queue",2,2]'
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "fq") | .blocked.waiters]' <<<"$output")" '[2]'
	run -0 --separate-stderr rlock --list
	assert_line --regexp '^fq +- +- +- +- +\[free, but 2 --fair waiters go first: a new request waits its turn\]$'
	# on a minority of the nodes: a majority is free, an acquire gets it, --status says free
	node_cli 2 DEL 'rlock:{fq}:queue' 'rlock:{fq}:qlease' 'rlock:{fq}:qmeta' >/dev/null
	run -0 --separate-stderr rlock --status -k fq
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[] | select(.name == "fq")]' <<<"$output")" '[]'
	run -0 --separate-stderr rlock -n -k fq -- true
}

@test "fair places on 2 of 5 nodes, one more node paused: --status and --list cannot tell (69), never 'free'" {
	# The paused node could make the places a majority (an acquire is refused then):
	# --status said free (0) and --list left the name out.
	node_fair_places 0 fq 2
	node_fair_places 1 fq 2
	run -0 --separate-stderr rlock --status -k fq
	node_pause 2
	run -69 --separate-stderr rlock --status -k fq
	assert_output ''
	assert_regex "$stderr" "^rlock: cannot tell whether rlock:\{fq\} is held: 2 of 5 Redlock nodes have live --fair places, 1 did not answer \(3 needed\)"
	run -69 --separate-stderr rlock --list
	assert_line --index 1 --regexp '^fq +- +- +- +- +\[cannot tell: 2 of 5 Redlock nodes have live --fair places, 1 did not answer \(3 needed\)\]$'
	node_resume 2
	run -0 --separate-stderr rlock --status -k fq
}

@test "fair places on 2 of 5 nodes and a lock-delay on a third: busy (75), each kind counted, in --status and --list" {
	# Neither kind on a majority, three of five nodes refuse an acquire together:
	# --status said free (0) and --list left the name out while -n was refused.
	local t
	node_fair_places 0 fd 2
	node_fair_places 1 fd 2
	t=$(node_cli 2 TIME | head -1)
	node_cli 2 ZADD 'rlock:{fd}:delay' $((t * 1000 + 120000)) deadbeef >/dev/null
	node_cli 2 PEXPIRE 'rlock:{fd}:delay' 120000 >/dev/null
	run -75 --separate-stderr rlock -n -k fd -- true
	run -75 --separate-stderr rlock --status -k fd
	assert_output --regexp '^rlock:\{fd\} is not free: busy on 3 of 5 Redlock nodes \(closed by a lock-delay on 1, live --fair places on 2\), none on a majority; an acquire is refused until .* \((1m[0-9][0-9]s|2m00s) left\)'
	run -75 --separate-stderr rlock --status --json -k fd
	assert_equal "$(jq -c '.split | [.nodes, .nodes_held, .nodes_closed, .nodes_queued]' <<<"$output")" '[3,0,1,2]'
	run -0 --separate-stderr rlock --list
	assert_equal "$(grep -c '^fd .*\[busy on 3 of 5 Redlock nodes (closed by a lock-delay on 1, live --fair places on 2), none on a majority\]$' <<<"$output")" 1
}

@test "a waiter takes over when the holder releases" {
	rlock_bg -k w -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 10 test -e h.started
	rlock_bg -vv -w 20s -k w -- "$HOLD" w
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	# waiting (listening on a node's release channel), not yet started: else the
	# release below could come before it even asked
	wait_until 30 grep -q 'listening for the release' "$waiter_err"
	touch h.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	wait_until 10 test -e w.started
	(($(env_of w RLOCK_FENCE) > $(env_of h RLOCK_FENCE)))
	touch w.release
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
}

@test "nodes that close idle clients (timeout 1): a waiter whose connections sat idle retries at once on fresh ones and takes the lock when the lease ends, not 69 'unavailable'" {
	local i
	for ((i = 0; i < N; i++)); do
		node_cli "$i" CONFIG SET timeout 1 >/dev/null
		node_cli "$i" SET 'rlock:{idle}' foreign-token PX 4000 >/dev/null
	done
	run --separate-stderr rlock -w 15s -k idle -- touch ran
	echo "exit $status: $stderr"
	((status == 0)) || fail "exit $status: $stderr"
	[[ -e ran ]]
	# not an outage: the servers answered all along
	[[ $stderr != *"retrying for up to"* ]] || fail "an outage was said: $stderr"
}

@test "nodes that close idle clients (timeout 1): a run whose connections sat idle through its command releases on fresh ones, not 'cannot release' (the lock held by nobody for its TTL)" {
	local i
	for ((i = 0; i < N; i++)); do
		node_cli "$i" CONFIG SET timeout 1 >/dev/null
	done
	# 30 s ttl: no renewal in the command's 3 s; the servers close the idle connections
	run --separate-stderr rlock -t 30s -k idler -- sleep 3
	echo "exit $status: $stderr"
	((status == 0)) || fail "exit $status: $stderr"
	[[ $stderr != *"cannot release"* ]] || fail "$stderr"
	assert_equal "$(keys_left idler)" 0
}

@test "nodes that close idle clients (timeout 1): the renewals of a long hold go on fresh connections, no renew-failed (as on one server)" {
	local i
	for ((i = 0; i < N; i++)); do
		node_cli "$i" CONFIG SET timeout 1 >/dev/null
	done
	# 9 s ttl: a renewal every 3 s, its connections idle in between, closed by the
	# servers before the second one
	run --separate-stderr rlock --events "$BATS_TEST_TMPDIR/ev" -t 9s -k renewer -- sleep 7
	echo "exit $status: $stderr"
	((status == 0)) || fail "exit $status: $stderr"
	grep -q '"event":"released"' "$BATS_TEST_TMPDIR/ev"
	if grep '"event":"renew-failed"' "$BATS_TEST_TMPDIR/ev"; then
		fail "a renewal failed with every node up"
	fi
}

@test "a stale holder on one node, the lock's holder on the others: a waiter's busy line names the holder that --status names, not the first node's" {
	local i rest='' stale real
	for ((i = 1; i < N; i++)); do
		rest+=${rest:+,}redis://127.0.0.1:$(node_port "$i")
	done
	# node 0 alone: another holder's lock there (a minority, left by a split)
	rlock_bg -u "redis://127.0.0.1:$(node_port 0)" --label stale -k split -- "$HOLD" stale
	stale=$RLOCK_PID
	wait_until 30 test -e stale.started
	track_pidfile "$BATS_TEST_TMPDIR/stale.pid"
	rlock_bg -u "$rest" --label real -k split -- "$HOLD" real
	real=$RLOCK_PID
	wait_until 30 test -e real.started
	track_pidfile "$BATS_TEST_TMPDIR/real.pid"
	run -75 rlock --status -k split
	[[ $output == *"label    real"* ]] || fail "$output"
	run -75 --separate-stderr rlock -n -k split -- true
	echo "$stderr"
	[[ $stderr == *"[real]"* ]] || fail "the busy line does not name the holder: $stderr"
	[[ $stderr != *stale* ]] || fail "the busy line names a minority's holder: $stderr"
	touch stale.release real.release
	rlock_wait "$stale"
	rlock_wait "$real"
}

@test "two holders on two nodes each, none on a majority: the busy and waiting lines name both, each with its nodes, never one as the holder" {
	rlock_bg -u "redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1)" --label one -t 30s -k two -- "$HOLD" one
	local one=$RLOCK_PID
	rlock_bg -u "redis://127.0.0.1:$(node_port 2),redis://127.0.0.1:$(node_port 3)" --label two -t 30s -k two -- "$HOLD" two
	local two=$RLOCK_PID
	wait_until 10 test -e one.started -a -e two.started
	run -75 --separate-stderr rlock -n -k two -- true
	assert_one_line_error
	[[ $stderr == *"held on 4 of 5 Redlock nodes by 2 holders, none on a majority: "*"[one] on 2, "*"[two] on 2" ]] || fail "$stderr"
	[[ $stderr != *"held by"* ]] || fail "$stderr"
	# -w 1s: the waiting line comes after a first round that leaves some of the wait (a
	# round on a loaded asan pass took the whole of a 200 ms one: "gave up waiting")
	run -75 --separate-stderr rlock -v -w 1s -k two -- true
	[[ $stderr == *"is busy (held on 4 of 5 Redlock nodes by 2 holders, none on a majority: "*"[one] on 2, "*"[two] on 2); waiting"* ]] || fail "$stderr"
	[[ $stderr != *"held by"* ]] || fail "$stderr"
	touch one.release two.release
	rlock_wait "$one"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$two"
	assert_equal "$RLOCK_STATUS" 0
}

# relocked I NAME: node I holds NAME's lock again (the renewal locked it after a flush).
relocked() { [[ $(node_cli "$1" EXISTS "rlock:{$2}") == 1 ]]; }

@test "a rolling restart under a holder (each node reached by its renewal before the next): --status and a nested run's RLOCK_FENCE stay the holder's fence, never an earlier one" {
	local i outer
	for ((i = 0; i < N; i++)); do
		node_cli "$i" SET 'rlock:{roll}:fence' 5 >/dev/null
	done
	# nodes 3 and 4 restarted empty (a minority): they count from 1, the merge brings
	# their counters up to the holder's fence 6
	node_cli 3 FLUSHALL >/dev/null
	node_cli 4 FLUSHALL >/dev/null
	start_holder roll -t 3s
	outer=$(env_of roll RLOCK_FENCE)
	assert_equal "$outer" 6
	# then nodes 0, 1 and 2, one at a time, each locked again by the renewal first
	for i in 0 1 2; do
		node_cli "$i" FLUSHALL >/dev/null
		wait_until 20 relocked "$i" roll
	done
	run -75 rlock --status -k roll
	[[ $output == *"fence    $outer"* ]] || fail "--status: $output"
	run -0 env RLOCK_KEY="$(env_of roll RLOCK_KEY)" RLOCK_TOKEN="$(env_of roll RLOCK_TOKEN)" \
		RLOCK_FENCE="$outer" "$RLOCK" -k roll -- sh -c 'echo "fence $RLOCK_FENCE"'
	assert_equal "$output" "fence $outer"
	touch roll.release
	rlock_wait "$HOLDER_PID"
	((RLOCK_STATUS == 0))
}

@test "1 and 2 nodes down or paused: acquired; a paused node costs at most --node-timeout" {
	node_kill 0
	run -0 rlock -k b -- true
	node_pause 1
	node_pause 2 # now 0 down, 1 and 2 paused: 2 of 5 left, so this must fail
	run -69 --separate-stderr rlock -n -k b -- touch ran
	[[ ! -e ran ]]
	node_resume 2
	# 0 down, 1 paused: the acquire waits for node 1 only up to the node timeout,
	# never the io-timeout (10 s here).
	local t0 t1
	t0=$(now_ms)
	run -0 rlock --node-timeout 300ms --io-timeout 10s -k b -- sh -c 'date +%s%3N > started'
	t1=$(cat started)
	echo "# 1 node down, 1 paused: command started $((t1 - t0)) ms after rlock (node timeout 300 ms)" >&3
	((t1 - t0 < 3000))
}

@test "2 of 5 nodes blackholed (SYN never answered): connected in parallel, acquired within 2 node timeouts" {
	# Connects run in the round's poll loop: the two dead nodes cost one node timeout
	# together (then are not retried within the same acquisition), never one each.
	local i port list='' t0 t1 t2
	for i in 0 1; do
		port=$(free_port)
		perl "$BATS_TEST_DIRNAME/blackhole.pl" "$port" "bh$i.ready" 3>&- 4>&- &
		track_pid $!
		wait_until 30 test -e "bh$i.ready"
		list+=${list:+,}redis://127.0.0.1:$port
	done
	for i in 0 1 2; do list+=,redis://127.0.0.1:$(node_port "$i"); done
	t0=$(now_ms)
	run -0 --separate-stderr rlock -u "$list" --node-timeout 2s -k bh -- sh -c 'date +%s%3N > started'
	t2=$(now_ms)
	t1=$(cat started)
	echo "# 2 of 5 nodes blackholed: command started $((t1 - t0)) ms after rlock (node timeout 2000 ms, bound 4000 ms); rlock done after $((t2 - t0)) ms (bound 6000 ms)" >&3
	((t1 - t0 < 4000))
	# The renewal thread connects the same way, in one round that may still run when the
	# command ends, and checks the eviction policy only on the nodes it reached (it
	# used to try each dead node for 2 node timeouts, one after the other).
	((t2 - t0 < 6000))
	[[ $(keys_left bh) == 0 ]]
	# --list too: connected at once, then each node scanned.
	t0=$(now_ms)
	run -0 rlock -u "$list" --node-timeout 2s --list
	t1=$(now_ms)
	echo "# --list with 2 of 5 nodes blackholed: $((t1 - t0)) ms (bound 4000 ms)" >&3
	((t1 - t0 < 4000))
}

@test "AUTH and SELECT on every node, within the round's poll loop; a wrong password: one line, 69" {
	local i list=
	for ((i = 0; i < N; i++)); do
		node_cli "$i" ACL SETUSER rl on '>s3cret' '~*' '&*' '+@all' >/dev/null
		list+=${list:+,}redis://rl@127.0.0.1:$(node_port "$i")/3
	done
	RLOCK_PASSWORD=s3cret run -0 rlock -u "$list" -k p -- \
		redis-cli -p "$(node_port 4)" -n 3 EXISTS 'rlock:{p}'
	assert_output 1
	RLOCK_PASSWORD=wrong run -69 --separate-stderr rlock -u "$list" -k p -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" 'no Redlock quorum: 0 of 5 nodes let us in, 5 refused \(3 needed\); authentication to 127\.0\.0\.1:[0-9]+ failed: wrong user name or password'
	[[ $stderr != *s3cret* ]]
	# a node that wants a password the others do not (none given): its NOAUTH named as
	# such, not as an ACL refusing INFO ("allow INFO (+info)")
	node_cli 4 CONFIG SET requirepass s3cret >/dev/null
	run -0 --separate-stderr rlock -k pa -- true
	assert_regex "$stderr" "^rlock: Redlock degraded: rlock:\{pa\} held by 4 of 5 nodes; missing: 127\.0\.0\.1:$(node_port 4) \(Redlock node 127\.0\.0\.1:$(node_port 4): the server requires a password \(NOAUTH\); see --password-file\)$"
	node_cli 4 -a s3cret --no-auth-warning CONFIG SET requirepass '' >/dev/null
}

@test "TLS: the handshakes run in the round's poll loop too (2 of 5 nodes never answer theirs)" {
	tls_make_certs "$BATS_TEST_TMPDIR/certs"
	local i list='' pids=() t0 t1
	for i in 0 1 2; do
		tls_redis_start
		pids+=("$TLS_PID")
		list+=${list:+,}rediss://127.0.0.1:$TLS_PORT
	done
	# A plain Redis swallows a ClientHello without a word: a handshake that hangs.
	for i in 0 1; do list+=,rediss://127.0.0.1:$(node_port "$i"); done
	t0=$(now_ms)
	run -0 --separate-stderr rlock -u "$list" --cacert "$TLS_CERTS/ca.pem" --node-timeout 2s \
		-k t -- sh -c 'date +%s%3N > started'
	t1=$(cat started)
	echo "# 3 TLS nodes, 2 silent: command started $((t1 - t0)) ms after rlock (node timeout 2000 ms, bound 4000 ms)" >&3
	((t1 - t0 < 4000))
	run -69 --separate-stderr rlock -u "$list" --cacert "$TLS_CERTS/other-ca.pem" \
		--node-timeout 300ms -k t -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" 'no Redlock quorum: 0 of 5 nodes reachable.*(certificate|verif)'
	for i in "${pids[@]}"; do redis_stop "$i"; done
}

@test "--history and --list with fewer nodes than a quorum answering: 69 and nothing on stdout, never a part shown as the whole" {
	local i args
	run -0 rlock -k hq -- true
	run -0 rlock -k hq -- true
	# a node that cannot read its history: reachable, but it refuses the script (the
	# teardown gives every right back)
	spoil() { node_cli "$1" ACL SETUSER default -evalsha -eval >/dev/null; }
	spoil 0
	spoil 1
	# a majority answers: every run was granted by a majority, which shares a node with it
	run -0 --separate-stderr rlock -k hq --history --json
	assert_equal "$(echo "$output" | jq -r '[.entries[].event] | join(" ")')" 'released acquired released acquired'
	spoil 2
	for args in "--json" ""; do
		# every node answers (2 of them): a loaded machine's connects may take longer
		# than the default node timeout (200 ms), which would say "0 reachable"
		# shellcheck disable=SC2086 # one option a word
		run -69 --separate-stderr rlock --node-timeout 2s -k hq --history $args
		assert_equal "$output" ""
		assert_one_line_error
		assert_regex "$stderr" "no Redlock quorum: 2 of 5 nodes answered, 3 refused \\(3 needed\\); 127\\.0\\.0\\.1:$(node_port 0): history: permission denied: NOPERM"
	done
	for i in 0 1 2; do node_pause "$i"; done
	for args in "-k hq --history" "--list --json" "--list"; do
		# shellcheck disable=SC2086 # one option a word
		run -69 --separate-stderr rlock --node-timeout 300ms $args
		assert_equal "$output" ""
		assert_one_line_error
		assert_regex "$stderr" 'no Redlock quorum: 2 of 5 nodes'
	done
}

@test "nodes that are read-only replicas: the give-up line says READONLY, the nodes' own answer (not another round's)" {
	local list i
	list=redis://127.0.0.1:$(node_port 0)
	for i in 1 2; do
		node_cli "$i" REPLICAOF 127.0.0.1 "$(node_port 3)" >/dev/null
		list+=,redis://127.0.0.1:$(node_port "$i")
	done
	for args in "-w 1s" "-n"; do
		# shellcheck disable=SC2086 # one option a word
		run -69 --separate-stderr rlock -u "$list" $args -k ro -- touch ran
		[[ ! -e ran ]]
		assert_regex "$(tail -1 <<<"$stderr")" "no Redlock quorum: 1 of 3 nodes answered, 2 refused \\(2 needed\\); 127\\.0\\.0\\.1:$(node_port 1): READONLY"
	done
	for i in 1 2; do node_cli "$i" REPLICAOF NO ONE >/dev/null; done
}

@test "nodes whose ACL refuses rlock's scripts (NOPERM): counted as refused and named, never as nodes that did not answer" {
	local p1 p2 list tok=0123456789abcdef0123456789abcdef
	p1=$(node_port 1) p2=$(node_port 2)
	list=redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$p1,redis://127.0.0.1:$p2
	node_cli 2 ACL SETUSER default -evalsha -eval >/dev/null
	run -0 --separate-stderr rlock -u "$list" -k np -- true
	assert_regex "$stderr" "released rlock:\{np\} on the 2 of 3 Redlock nodes that answered; 1 refused and may keep it until its TTL ends \(in at most [0-9.]+ s\), fewer than a majority: 127\.0\.0\.1:$p2 \(release: permission denied: NOPERM"
	node_cli 1 ACL SETUSER default -evalsha -eval >/dev/null
	run -69 --separate-stderr rlock -u "$list" -k np --status
	assert_one_line_error
	assert_regex "$stderr" "no Redlock quorum: 1 of 3 nodes answered, 2 refused \(2 needed\); 127\.0\.0\.1:$p1: status: permission denied: NOPERM"
	run -69 --separate-stderr rlock -u "$list" -k np -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "no Redlock quorum: 1 of 3 nodes let us in, 2 refused \(2 needed\); 127\.0\.0\.1:$p1: acquire: permission denied: NOPERM"
	run -69 --separate-stderr rlock -u "$list" -k np --held --token "$tok"
	assert_one_line_error
	assert_regex "$stderr" "0 of 3 Redlock nodes have the token, 2 refused \(2 needed\); 127\.0\.0\.1:$p1: status: permission denied: NOPERM"
	[[ $stderr != *'did not'* && ! -e ran ]]
}

@test "rediss:// nodes that are plaintext Redis servers: 69 at once with the plaintext line, as one such URL (no retry without -w)" {
	tls_make_certs "$BATS_TEST_TMPDIR/certs"
	local i list='' t0 ms
	for i in 0 1 2; do list+=${list:+,}rediss://127.0.0.1:$(node_port "$i"); done
	t0=$(now_ms)
	# no -n, no -w: an outage would be waited out forever (timeout: the bound)
	run --separate-stderr timeout -s KILL 30 "$RLOCK" -u "$list" --cacert "$TLS_CERTS/ca.pem" \
		-k pt -- touch ran
	ms=$(($(now_ms) - t0))
	((status == 69)) || fail "exit $status after $ms ms: $stderr"
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" 'no Redlock quorum: 0 of 3 nodes reachable.*answered in plaintext .*use redis://'
	echo "# 3 rediss:// nodes, all plaintext: 69 after $ms ms (node timeout 200 ms)" >&3
	# the inspection commands say the same
	run -69 --separate-stderr rlock -u "$list" --cacert "$TLS_CERTS/ca.pem" -k pt --status
	assert_regex "$stderr" 'answered in plaintext'
	[[ $(keys_left pt) == 0 ]]
}

@test "a paused TLS node: no probe while a quorum answers; when rounds fail, each silent node is probed once, and its error may pass" {
	tls_make_certs "$BATS_TEST_TMPDIR/certs"
	local i list='' pids=() n
	for i in 0 1 2; do
		tls_redis_start
		pids+=("$TLS_PID")
		list+=${list:+,}rediss://127.0.0.1:$TLS_PORT
	done
	kill -STOP "${pids[2]}"
	# degraded but working: the acquire, several renewals and the release, no probe (a
	# 2 s lease: each round waits out the silent node's --node-timeout, and 600 ms left
	# a sanitizer build beside a CPU hog no margin: 79). A 1 s --node-timeout (3 s lease):
	# a live node's reply that took more than the default 200 ms on such a machine failed
	# the round, and the probe followed (1 of 3 runs under scripts/flaky's hog)
	run -0 --separate-stderr rlock -vv -u "$list" --cacert "$TLS_CERTS/ca.pem" -t 3s \
		--node-timeout 1s -k pz -- sleep 2
	n=$(grep -c 'probing for a plaintext' <<<"$stderr" || true)
	assert_equal "$n" 0
	# no quorum: many rounds within -w, the two silent nodes probed once each; a paused
	# server may answer later (waited for, not a final error)
	kill -STOP "${pids[1]}"
	run --separate-stderr rlock -vv -u "$list" --cacert "$TLS_CERTS/ca.pem" -w 2s -k pz -- touch ran
	kill -CONT "${pids[1]}" "${pids[2]}"
	((status == 69 || status == 75)) || fail "exit $status: $stderr"
	[[ ! -e ran ]]
	n=$(grep -c 'probing for a plaintext' <<<"$stderr" || true)
	assert_equal "$n" 2
	[[ $stderr != *'answered in plaintext'* ]] || fail "a paused TLS server taken for a plaintext one: $stderr"
	for i in "${pids[@]}"; do redis_stop "$i"; done
}

@test "3 nodes down: exit 69 with one line, no key left on any node" {
	node_kill 0
	node_kill 1
	node_pause 2
	run -69 --separate-stderr rlock -n --node-timeout 300ms -k c -- touch ran
	[[ ! -e ran ]]
	assert_one_line_error
	assert_regex "$stderr" 'no Redlock quorum'
	# The paused node gets the acquire and the release in that order on resume.
	node_resume 2
	wait_until 10 node_up 2
	[[ $(keys_left c) == 0 ]]
}

@test "fences strictly increase while the majorities shift" {
	# With the plain maximum of per-node counters, the third run would get the same
	# fence as the second (TRAPS: Redlock fences).
	local pause prev=0 f
	for pause in "3 4" "1 2" "0 2" "0 1" "2 3"; do
		for i in $pause; do node_pause "$i"; done
		run -0 rlock --node-timeout 300ms -k f -- sh -c 'echo "$RLOCK_FENCE" > fence'
		for i in $pause; do node_resume "$i"; done
		f=$(cat fence)
		echo "# paused $pause: fence $f" >&3
		((f > prev))
		prev=$f
	done
}

# scripts_run I: the scripts node I ran since its last CONFIG RESETSTAT (EVAL + EVALSHA).
scripts_run() {
	node_cli "$1" INFO commandstats | tr -d '\r' |
		awk -F'[:=,]' '/^cmdstat_eval(sha)?:/ { n += $3 } END { print n + 0 }'
}

@test "fence merge: no round when the nodes count in step; a node ahead is merged into the others" {
	local i
	run -0 rlock -k fm -- true # the counters are in step from here on
	for ((i = 0; i < N; i++)); do node_cli "$i" CONFIG RESETSTAT >/dev/null; done
	run -0 rlock -k fm -- true
	# acquire and release, no fence round (it was a third script on every node)
	for ((i = 0; i < N; i++)); do
		[[ $(scripts_run "$i") == 2 ]] || fail "node $i ran $(scripts_run "$i") scripts, expected 2"
	done
	# node 0 counted further (a run that reached it alone): the largest count wins and
	# is written back to the others before the command starts
	node_cli 0 SET 'rlock:{fm}:fence' 100 >/dev/null
	run -0 rlock -k fm -- sh -c 'echo "$RLOCK_FENCE" > fence'
	[[ $(cat fence) == 101 ]] || fail "fence $(cat fence), expected 101"
	for ((i = 1; i < N; i++)); do
		[[ $(node_cli "$i" GET 'rlock:{fm}:fence') == 101 ]] || fail "node $i was not merged"
	done
}

@test "a node restarted empty during the run is locked again by the renewal, its fence counter brought up" {
	run -0 rlock -k r -- true
	run -0 rlock -k r -- true
	rlock_bg -t 3s -k r -- "$HOLD" h # fence 3
	wait_until 10 test -e h.started
	node_kill 0
	node_start 0
	wait_until 10 node_has 0 'rlock:{r}' "$(env_of h RLOCK_TOKEN)"
	# the relock counted 1 there; the renewal writes the holder's fence back (issue 41)
	wait_until 10 node_has 0 'rlock:{r}:fence' 3
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 0))
	[[ $(keys_left r) == 0 ]]
	# documented unsafe (a node must keep what it granted): said, in one line
	assert_equal "$(grep -c "^rlock: Redlock node 127\.0\.0\.1:$(node_port 0) had lost rlock:{r} (restarted without persistence, or its key deleted): locked it again" "$RLOCK_ERR")" 1
}

@test "rolling restart of 3 nodes, one slow for a round: the fence never goes back (issue 41)" {
	# 3 nodes: 0, 1, 2. Fences 1..5; node 0 restarted empty; a run (6) must bring it up
	# although 1 and 2 agree already; node 1 restarted empty; with node 2 paused for one
	# round the next run is granted by 0 and 1: its fence must be 7, not 2.
	local f
	# shellcheck disable=SC2034 # exported by setup (redlock.bash): rlock reads it
	RLOCK_URL=redis://127.0.0.1:$(node_port 0),redis://127.0.0.1:$(node_port 1),redis://127.0.0.1:$(node_port 2)
	for _ in 1 2 3 4 5; do run -0 rlock -k rr -- true; done
	node_kill 0
	node_start 0
	run -0 rlock -k rr -- sh -c 'echo "$RLOCK_FENCE" > fence'
	assert_equal "$(cat fence)" 6
	local left
	left=$(node_cli 0 GET 'rlock:{rr}:fence')
	node_kill 1
	node_start 1
	node_pause 2
	run -0 rlock --node-timeout 300ms -k rr -- sh -c 'echo "$RLOCK_FENCE" > fence'
	node_resume 2
	f=$(cat fence)
	echo "# after the second restart, node 2 paused: fence $f" >&3
	((f == 7)) || fail "fence $f after 6: it went back (node 0 was left at $left by the run that got 6)"
	assert_equal "$left" 6
}

@test "--break of a run's lock on every node: the renewal finds it lost (79), as on one server; it does not lock the nodes again" {
	rlock_bg -t 2s -k bk -- "$HOLD" h
	wait_until 10 test -e h.started
	run -0 rlock -k bk --break
	# main: the renewal locked the 5 nodes again with its token and the run went on
	rlock_wait "$RLOCK_PID" 20
	((RLOCK_STATUS == 79)) || fail "the run exited $RLOCK_STATUS after its lock was broken: $(cat "$RLOCK_ERR")"
	[[ $(keys_left bk) == 0 ]]
}

@test "--break that a node paused for writes holds back (its scripts flushed): waited for up to --io-timeout, sent whole on NOSCRIPT, broken there too; past it, one line names the node" {
	# CLIENT PAUSE WRITE holds the break back and drops it with the connection; a late
	# NOSCRIPT was taken for an answer: node 2 kept the broken holder's lock for its TTL
	node_cli 2 SET 'rlock:{pb}' tok PX 30000 >/dev/null
	node_cli 3 SET 'rlock:{pb}' tok PX 30000 >/dev/null
	node_cli 2 SCRIPT FLUSH >/dev/null
	node_cli 2 CLIENT PAUSE 600 WRITE >/dev/null
	run -0 --separate-stderr rlock -k pb --break
	assert_equal "$(keys_left pb)" 0
	[[ $stderr != *'did not answer'* ]] || fail "$stderr"
	node_cli 2 SET 'rlock:{pb}' tok PX 30000 >/dev/null
	node_cli 3 SET 'rlock:{pb}' tok PX 30000 >/dev/null
	node_cli 2 CLIENT PAUSE 1500 WRITE >/dev/null
	# the wait runs to one --io-timeout from the start of the break, a little less from
	# its last round, and a loaded machine wakes from it late: 2xx or 3xx ms here, more
	# when slower; never the --node-timeout's 100, nor the default io-timeout's 2000
	run -0 --separate-stderr rlock -k pb --node-timeout 100ms --io-timeout 300ms --break
	assert_regex "$stderr" "broke rlock:\{pb\} on the 4 of 5 Redlock nodes that answered; 1 did not and may keep it until its TTL, fewer than a majority: 127\.0\.0\.1:$(node_port 2) \(127\.0\.0\.1:$(node_port 2) did not answer within ([2-9][0-9][0-9]|1[0-9]{3}) ms\)"
	node_cli 2 CLIENT UNPAUSE >/dev/null
}

@test "a keeper's lock broken on every node: the keeper ends at its next renewal; --held and --release say 79 (explorer: seed 1947886235 round 27)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	rlock -k kb --acquire -t 2s --log-file "$PWD/k.log" >vars.sh
	local pid
	pid=$(node_cli 0 HGET 'rlock:{kb}:owner' pid)
	[[ $(cat "/proc/$pid/comm") == rlock-keeper ]]
	echo "$pid" >keeper.pid
	run -0 rlock -k kb --break
	# main: still running (and silent) 10 s and more later, the nodes locked again
	wait_until 15 proc_gone "$pid" || {
		kill -KILL "$pid"
		fail "the keeper still runs after its lock was broken: $(cat k.log)"
	}
	[[ $(keys_left kb) == 0 ]]
	run -79 bash -c ". ./vars.sh && '$RLOCK' --held"
	run -79 bash -c ". ./vars.sh && '$RLOCK' -k kb --release"
}

@test "lost-update checker with 5 nodes: no overlap, no lost update" {
	# Its line, and on failure its first overlaps and rlock errors, are shown. The check
	# is about overlaps, not speed: a round deadline long enough for a sanitized rlock on
	# a loaded machine (with the default 200 ms, a round that connects 5 nodes there
	# missed it: no quorum, exit 69, counted as an error).
	run "$RLOCK_SOURCE_DIR/scripts/lost-update-check" -p 4 -i 10 --rlock "$RLOCK" \
		-- --node-timeout 10s
	echo "# ${output//$'\n'/$'\n'# }" >&3
	((status == 0)) || fail "the checker exited $status (its output above)"
}

@test "usage: --wait-replicas and other modes are refused with several URLs; one password" {
	run -64 --separate-stderr rlock --wait-replicas 1 -k u -- true
	assert_regex "$stderr" 'Redlock'
	run -64 --separate-stderr rlock -u redis://:a@127.0.0.1:1 -u redis://:b@127.0.0.1:2 -k u -- true
	assert_regex "$stderr" 'share one password'
	# one user too: the last user would otherwise log in to every node, and a node
	# whose user it is not would count as down (one failure fewer tolerated, unsaid)
	run -64 --separate-stderr rlock -u redis://alice@127.0.0.1:1,redis://bob@127.0.0.1:2,redis://127.0.0.1:3 -k u -- true
	assert_regex "$stderr" 'share one user'
	[[ "$stderr" != *$'\n'* ]]
	# the same user twice, and a URL without one, is one user: not a usage error
	run -69 --separate-stderr rlock -n -u redis://alice@127.0.0.1:1,redis://127.0.0.1:2,redis://alice@127.0.0.1:3 -k u -- touch ran
	refute_regex "$stderr" 'share one user'
	# one TLS setting serves every node: a mixed list would speak TLS to plain servers
	for l in redis://127.0.0.1:1,rediss://127.0.0.1:2,redis://127.0.0.1:3 \
		rediss://127.0.0.1:1,rediss://127.0.0.1:2,redis://127.0.0.1:3; do
		run -64 --separate-stderr rlock -u "$l" -k u -- touch ran
		assert_regex "$stderr" 'must all use TLS \(rediss://\) or none'
	done
	# a Unix socket among TLS nodes, wherever it stands in the list
	for l in rediss://127.0.0.1:1,unix:///nonexistent/s unix:///nonexistent/s,rediss://127.0.0.1:1; do
		run -64 --separate-stderr rlock -u "$l" -k u -- touch ran
		assert_regex "$stderr" 'TLS over a Unix socket is not supported'
	done
	[[ ! -e ran ]]
	run -64 --separate-stderr rlock -s -k u -- true
	assert_regex "$stderr" 'not Redlock'
	# --supersede: each master orders the requests as they reach it; two that cross
	# would each replace the other on some node (both 80, neither runs)
	run -64 --separate-stderr rlock --supersede -w 10s -k u -- touch ran
	assert_regex "$stderr" '^rlock: --supersede uses one server, not Redlock'
	[[ $stderr != *$'\n'* ]]
	run -64 --separate-stderr rlock --supersede --acquire -w 10s -k u
	[[ ! -e ran ]]
	# a lease whose renewal cannot wait out one slow node (--node-timeout) before it
	# counts as lost: lost (79) whenever a node is paused, or never acquired
	run -64 --separate-stderr rlock -t 500ms -k u -- touch ran
	assert_equal "$stderr" "rlock: -t 500ms is too short for Redlock with --node-timeout 200ms: a renewal that waits out one slow node must be confirmed before the lease counts as lost; give -t 600ms or more, or a shorter --node-timeout (try 'rlock --help')"
	run -64 --separate-stderr rlock -t 1s --node-timeout 500ms --acquire -k u
	assert_regex "$stderr" 'give -t 1400ms or more'
	[[ ! -e ran ]]
	run -0 rlock -t 600ms -k u -- touch ran
	run -0 rlock -t 500ms --node-timeout 150ms -k u -- true
}

@test "distinct nodes: the same host:port twice is refused before any traffic (64); three distinct nodes are fine" {
	local p0 p1 dead
	p0=$(node_port 0) p1=$(node_port 1) dead=$(dead_port)
	# a port nobody listens on: any traffic would have been a 69, not a 64
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$dead,redis://127.0.0.1:$dead,redis://127.0.0.1:$p1" -k d -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "distinct servers: redis://127.0.0.1:$dead and redis://127.0.0.1:$dead are the same"
	# its database aside, one server is one node; so is a host written in capitals
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$p0/1,redis://127.0.0.1:$p0/2,redis://127.0.0.1:$p1" -k d -- touch ran
	assert_one_line_error
	run -64 --separate-stderr rlock -u "redis://LOCALHOST:$p0,redis://localhost:$p0,redis://127.0.0.1:$p1" -k d -- touch ran
	assert_one_line_error
	[[ ! -e ran ]] || fail "a command ran over a quorum with one server twice"
	[[ $(node_cli 0 EXISTS 'rlock:{d}:fence') == 0 ]] || fail "node 0 was written to"
	run -0 rlock -u "redis://127.0.0.1:$p0,redis://127.0.0.1:$p1,redis://127.0.0.1:$(node_port 2)" -k d -- touch ran
	[[ -e ran ]]
}

@test "distinct nodes: one server under two names (an alias, its Unix socket) exits 64 naming both; INFO refused exits 69" {
	local p0 p1 port
	p0=$(node_port 0) p1=$(node_port 1) port=$(free_port)
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$p0,redis://localhost:$p0,redis://127.0.0.1:$p1" -k d -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "distinct servers: 127.0.0.1:$p0 and localhost:$p0 are the same server"
	# a server on a TCP port and a Unix socket at once
	redis_start --unix --port "$port" --bind 127.0.0.1
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$port,redis://127.0.0.1:$p1,unix://$REDIS_SOCKET" -k d -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "127.0.0.1:$port and $REDIS_SOCKET are the same server"
	[[ ! -e ran ]] || fail "a command ran over a quorum with one server twice"
	[[ $(node_cli 0 EXISTS 'rlock:{d}:fence') == 0 ]] || fail "node 0 was written to"
	# distinct, one of them on its Unix socket: fine
	run -0 rlock -u "redis://127.0.0.1:$p0,redis://127.0.0.1:$p1,unix://$REDIS_SOCKET" -k d -- touch ran
	[[ -e ran ]]
	redis_stop "$REDIS_PID"
	# an ACL user that may not run INFO: the nodes cannot be told apart, so no run (69)
	local i
	for ((i = 0; i < 3; i++)); do
		node_cli "$i" ACL SETUSER noinfo on '>pw' '~*' '&*' +@all -info >/dev/null
	done
	RLOCK_PASSWORD=pw run -69 --separate-stderr rlock --user noinfo \
		-u "redis://127.0.0.1:$p0,redis://127.0.0.1:$p1,redis://127.0.0.1:$(node_port 2)" -k d -- touch ran2
	assert_one_line_error
	assert_regex "$stderr" 'cannot tell who it is \(INFO refused: NOPERM\).*\+info'
	[[ ! -e ran2 ]]
	for ((i = 0; i < 3; i++)); do
		node_cli "$i" ACL DELUSER noinfo >/dev/null
	done
}
