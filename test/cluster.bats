#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $output
# Redis Cluster (SPEC §2, §8): one real 3-master + 3-replica cluster for the file. The
# URL is one node's (REDIS_URL, the first node); rlock follows MOVED/ASK to the owner
# of each lock's slot, wakes waiters on that node (sharded pub/sub on Redis >= 7), lists
# every master, and keeps a lock through a CLUSTER FAILOVER.

load helpers
load cluster

CHECK=$RLOCK_SOURCE_DIR/scripts/lost-update-check

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	cluster_start
}

teardown_file() { redis_stop_all; }

setup() {
	local p
	for p in $(cluster_masters); do
		redis-cli -p "$p" FLUSHALL >/dev/null
	done
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
}

# a test that stops a master (SIGSTOP) resumes it, and gives the cluster back its
# settings, on any way out
teardown() {
	if [[ -n ${EVICT_PORT:-} ]]; then # the eviction test's master, on any way out
		redis-cli -p "$EVICT_PORT" CONFIG SET maxmemory-policy noeviction >/dev/null 2>&1 || true
	fi
	local p
	if [[ -n ${ACL_USERS:-} ]]; then # the ACL test's users, on any way out
		for p in $CLUSTER_PORTS; do
			# shellcheck disable=SC2086  # user names
			redis-cli -p "$p" ACL DELUSER $ACL_USERS >/dev/null 2>&1 || true
		done
	fi
	if [[ -n ${PAUSED_PID:-} ]]; then
		kill -CONT "$PAUSED_PID" 2>/dev/null || true
		cluster_settings_back
	fi
	common_teardown
}

# cluster_settings_back: what the paused-master test changed, as cluster_start set it.
cluster_settings_back() {
	local p
	for p in $CLUSTER_PORTS; do
		redis-cli -p "$p" CONFIG SET cluster-require-full-coverage yes >/dev/null 2>&1 || true
		redis-cli -p "$p" CONFIG SET cluster-replica-no-failover no >/dev/null 2>&1 || true
	done
}

# cluster_no_fail PORT...: no node flags another as failing (fail, fail?): a master
# stopped past the node timeout is marked FAIL, cleared some seconds after it answers.
cluster_no_fail() {
	local p
	for p in "$@"; do
		! redis-cli -p "$p" CLUSTER NODES | awk '{ print $3 }' | grep -q fail || return 1
	done
}

# pid_of_port PORT: the pid of the cluster node on PORT (CLUSTER_PORTS and CLUSTER_PIDS
# are in the same order).
pid_of_port() {
	local ports pids i
	read -ra ports <<<"$CLUSTER_PORTS"
	read -ra pids <<<"$CLUSTER_PIDS"
	for i in "${!ports[@]}"; do
		[[ ${ports[i]} == "$1" ]] && echo "${pids[i]}" && return 0
	done
	return 1
}

# name_on PORT: a lock name whose keys live on the master at PORT.
name_on() { cluster_name_on "$1" n; }

# shard_subscribed PORT CHANNEL: a client subscribes to CHANNEL on PORT (SSUBSCRIBE).
shard_subscribed() {
	(($(redis-cli -p "$1" PUBSUB SHARDNUMSUB "$2" | tail -1) >= 1))
}

@test "names that hash to every master: acquire, busy, release on the slot's owner" {
	local m name pid n=0
	for m in $(cluster_masters); do
		name=$(name_on "$m")
		run -0 rlock -k "$name" -- sh -c 'echo "$RLOCK_FENCE"'
		assert_output 1
		rm -f a.*
		rlock_bg -k "$name" -- "$HOLD" a
		pid=$RLOCK_PID
		wait_until 30 test -e a.started
		[[ $(redis-cli -p "$m" EXISTS "rlock:{$name}") == 1 ]] || fail "not on its owner $m"
		run -75 rlock -n -k "$name" -- true
		touch a.release
		rlock_wait "$pid" 30
		assert_equal "$RLOCK_STATUS" 0
		[[ $(redis-cli -p "$m" EXISTS "rlock:{$name}") == 0 ]] || fail "left on $m"
		[[ $(redis-cli -p "$m" GET "rlock:{$name}:fence") == 2 ]]
		n=$((n + 1))
	done
	((n == 3))
}

@test "--held on every master: 0 from inside the job, 79 after --break (redirects followed)" {
	local m name n=0
	for m in $(cluster_masters); do
		name=$(name_on "$m")
		run -0 rlock -k "$name" -- sh -c '"$0" --held && "$0" --held --json' "$RLOCK"
		assert_output --partial '"held":true'
		rlock_bg -k "$name" -- sh -c 'touch started; while [ ! -e go ]; do sleep 0.02; done
			"$0" --held; echo $? >held.rc' "$RLOCK"
		wait_until 30 test -e started
		run -0 rlock -q -k "$name" --break
		touch go
		rlock_wait "$RLOCK_PID" 30
		[[ $(cat held.rc) == 79 ]]
		rm -f started go held.rc
		n=$((n + 1))
	done
	((n == 3))
}

@test "re-entrance on every master: a nested rlock -n of the held name runs its command" {
	local m name n=0
	for m in $(cluster_masters); do
		name=$(name_on "$m")
		# The check of the inherited token follows MOVED, as every other request does.
		run -0 rlock -k "$name" -- sh -c '"$0" -n -k "$1" -- echo nested' "$RLOCK" "$name"
		assert_output nested
		n=$((n + 1))
	done
	((n == 3))
}

# supersede_placed PORT NAME: a --supersede request waits on NAME, on the master at PORT.
supersede_placed() { [[ $(redis-cli -p "$1" EXISTS "rlock:{$2}:supersede") == 1 ]]; }

@test "deploy queues on the slot's owner: --preempt takes a --preemptible holder's lock (81 once taken), --supersede replaces the waiting request (80)" {
	local m name h r a
	m=$(cluster_masters | awk 'NR == 2')
	name=$(name_on "$m")
	rlock_bg -k "$name" -t 3s --preemptible -c 'trap "exit 3" TERM; touch h.started; while :; do sleep 0.05; done'
	h=$RLOCK_PID
	wait_until 30 test -e h.started
	rlock_bg -k "$name" -t 30s --preempt -w 60s -c 'touch r.ran'
	r=$RLOCK_PID
	rlock_wait "$h" 30
	assert_equal "$RLOCK_STATUS" 81
	rlock_wait "$r" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e r.ran ]]
	# --supersede: the older waiting request is replaced on the slot's owner, woken there
	rm -f h.started
	rlock_bg -k "$name" -- "$HOLD" s
	h=$RLOCK_PID
	wait_until 30 test -e s.started
	rlock_bg -k "$name" --supersede -w 60s -c 'touch a.ran'
	a=$RLOCK_PID
	wait_until 30 supersede_placed "$m" "$name"
	rlock_bg -k "$name" --supersede -w 60s -c 'touch b.ran'
	r=$RLOCK_PID
	rlock_wait "$a" 30
	assert_equal "$RLOCK_STATUS" 80
	touch s.release
	rlock_wait "$h" 30
	rlock_wait "$r" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e b.ran && ! -e a.ran ]]
}

@test "several locks whose slots are on different masters: all or nothing" {
	local m names=() sorted held name
	for m in $(cluster_masters); do names+=("$(name_on "$m")"); done
	((${#names[@]} == 3))
	mapfile -t sorted < <(printf '%s\n' "${names[@]}" | sort)
	# all three, each on its own master, taken in the canonical (sorted) order
	run -0 rlock -k "${names[2]}" -k "${names[0]}" -k "${names[1]}" -- sh -c 'echo "$RLOCK_KEYS"'
	assert_output "rlock:{${sorted[0]}} rlock:{${sorted[1]}} rlock:{${sorted[2]}}"
	# the last one busy: the two taken before it are given back on their masters (75)
	rlock_bg -k "${sorted[2]}" -- "$HOLD" h
	held=$RLOCK_PID
	wait_until 30 test -e h.started
	run -75 rlock -n -k "${names[0]}" -k "${names[1]}" -k "${names[2]}" -- touch ran
	[[ ! -e ran ]]
	for name in "${sorted[0]}" "${sorted[1]}"; do
		# taken (its fence counted a second acquisition), then given back
		[[ $(redis-cli -c -p "$REDIS_PORT" GET "rlock:{$name}:fence") == 2 ]] ||
			fail "lock $name was not taken before the busy one"
		[[ $(redis-cli -c -p "$REDIS_PORT" EXISTS "rlock:{$name}") == 0 ]] ||
			fail "lock $name, taken before the busy one, was not given back"
	done
	touch h.release
	rlock_wait "$held" 30
}

@test "hand-off is event-driven on the slot's owner: a plain waiter's wake list, a shared request's shard channel" {
	local m name a_pid b_pid c_pid
	m=$(cluster_masters | grep -vx "$REDIS_PORT" | head -1)
	name=$(name_on "$m")
	rlock_bg -k "$name" -t 60s -- "$HOLD" a
	a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -vv -k "$name" -- sh -c 'date +%s%3N >b.start'
	b_pid=$RLOCK_PID
	local b_err=$RLOCK_ERR
	rlock_bg -s -k "$name" -- true
	c_pid=$RLOCK_PID
	wait_until 30 eval '[[ $(redis-cli -p "$m" ZCARD "rlock:{$name}:waiters") == 1 ]]'
	wait_until 30 shard_subscribed "$m" "rlock:{$name}:released"
	touch a.release
	rlock_wait "$a_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$c_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	redis-cli -p "$m" INFO commandstats | grep -q '^cmdstat_blpop:calls=[1-9]'
	(($(cat b.start) >= $(cat a.end)))
	echo "# cluster hand-off ms: $(($(cat b.start) - $(cat a.end))) (holder's command ends → waiter's starts)" >&3
	# announced on the shard (SPUBLISH from the release script, counted on the owner)
	redis-cli -p "$m" INFO commandstats | grep -q '^cmdstat_spublish:calls=[1-9]'
	# the product guarantee: woken by the release, not by its backoff or the lease
	grep -q 'woken by the release' "$b_err" || fail "not woken by the release: $(cat "$b_err")"
}

@test "--list shows locks on every master; --status and --break follow redirects" {
	local m name names=() pids=() other
	for m in $(cluster_masters); do
		name=$(name_on "$m")
		names+=("$name")
		rlock_bg -k "$name" -- "$HOLD" "$name"
		pids+=("$RLOCK_PID")
	done
	for name in "${names[@]}"; do wait_until 30 test -e "$name.started"; done
	run -0 rlock --list
	for name in "${names[@]}"; do assert_output --partial "$name"; done
	run -0 rlock --list --json
	for name in "${names[@]}"; do assert_output --partial "\"$name\""; done
	# --status from a node that does not own the slot
	name=${names[0]}
	other=$(cluster_masters | grep -vx "$(cluster_owner "rlock:{$name}")" | head -1)
	REDIS_URL=redis://127.0.0.1:$other run -75 rlock -k "$name" --status
	assert_output --regexp "pid +${pids[0]}"
	REDIS_URL=redis://127.0.0.1:$other run -0 rlock -k "${names[1]}" --break
	for name in "${names[@]}"; do touch "$name.release"; done
	for m in "${pids[@]}"; do rlock_wait "$m" 30; done
}

@test "--list on a Cluster whose last master does not answer (SIGSTOP): nothing on stdout, 69, one line; --check says which node, and so do --status, --held and -n" {
	local m name names=() pids=() last last_pid lastname p waitname waiter waiter_err
	for m in $(cluster_masters); do
		name=$(name_on "$m")
		names+=("$name")
		rlock_bg -k "$name" -t 60s -- "$HOLD" "$name"
		pids+=("$RLOCK_PID")
	done
	for name in "${names[@]}"; do wait_until 30 test -e "$name.started"; done
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(echo "$output" | jq '.locks | length')" 3
	# the master of the last slots: --list scans it last, after the others' locks
	last=$(redis-cli -p "$REDIS_PORT" CLUSTER NODES | awk '$3 ~ /master/ && $NF ~ /-16383$/ { split($2, a, "[:@]"); print a[2] }')
	[[ -n $last && $last != "$REDIS_PORT" ]] || fail "no last master apart from the seed: $last"
	last_pid=$(pid_of_port "$last")
	lastname=$(name_on "$last")
	# paused, it stays the master and the others keep serving their slots, however long
	# the test takes (no failover by its replica, no CLUSTERDOWN for the others)
	for p in $CLUSTER_PORTS; do
		redis-cli -p "$p" CONFIG SET cluster-require-full-coverage no >/dev/null
		redis-cli -p "$p" CONFIG SET cluster-replica-no-failover yes >/dev/null
	done
	PAUSED_PID=$last_pid
	waitname=$(cluster_name_on "$last" w) # asked before the pause: it asks every master
	kill -STOP "$last_pid"
	local t=(--connect-timeout 300ms --io-timeout 300ms)
	# a waiter whose lock lives on the paused master: its lines name that master, not the
	# URL's node, which answered all along
	rlock_bg "${t[@]}" -w 60s -k "$waitname" -- touch "$waitname.ran"
	waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	wait_until 30 grep -q "; retrying" "$waiter_err"
	run -69 --separate-stderr rlock "${t[@]}" --list --json
	assert_one_line_error
	assert_equal "$output" ""
	run -69 --separate-stderr rlock "${t[@]}" --list
	assert_one_line_error
	assert_equal "$output" ""
	# the line names the master that did not answer (host:port), not "the lock's server"
	[[ $stderr == *"127.0.0.1:$last"* ]] || fail "no server named: $stderr"
	[[ $stderr != *"the lock's server"* ]] || fail "said the lock's server: $stderr"
	# a lock on the paused master: --status and --held cannot say, and print nothing
	# (--held --json says null: "cannot tell", its documented unknown)
	run -69 --separate-stderr rlock "${t[@]}" -k "$lastname" --status --json
	assert_equal "$output" ""
	run -69 --separate-stderr rlock "${t[@]}" -k "$lastname" --held --token 0123456789abcdef0123456789abcdef --json
	assert_equal "$(echo "$output" | jq -c '[.held, .ttl_left_ms, .fence]')" '[null,null,null]'
	# -n looks once (README: it fails at once): the paused master is asked once (for the
	# slot map, or the acquire), not again at each of the route's lookups (6 io
	# timeouts, and the map asked of it first each time), and the line names it
	local t0
	t0=$(now_ms)
	run -69 --separate-stderr rlock "${t[@]}" -n -k "$lastname" -- touch ran
	echo "# -n, the lock's master paused: 69 after $(($(now_ms) - t0)) ms (io timeout 300 ms)" >&3
	assert_regex "${stderr##*$'\n'}" "^rlock: 127\.0\.0\.1:$last did not answer (CLUSTER|EVALSHA) in time\$"
	[[ ! -e ran ]]
	# --check reports per node: the paused one is a finding, and the verdict says so
	run -2 --separate-stderr rlock "${t[@]}" --check --json
	assert_equal "$(echo "$output" | jq -r '.verdict')" unsafe
	assert_equal "$(echo "$output" | jq -r --arg n "127.0.0.1:$last" '[.findings[] | select(.node == $n and .check == "reach") | .level] | join(" ")')" unsafe
	assert_equal "$(echo "$output" | jq -r '.findings[] | select(.check == "topology") | .fact')" 'Cluster: 2 of 3 masters reachable'
	kill -CONT "$last_pid"
	PAUSED_PID=
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	grep -q "lock '$waitname': 127\.0\.0\.1:$last answers again after" "$waiter_err" ||
		fail "the waiter's lines: $(cat "$waiter_err")"
	cluster_settings_back
	# shellcheck disable=SC2086 # one port a word
	wait_until 60 cluster_no_fail $CLUSTER_PORTS
	# shellcheck disable=SC2086 # one port a word
	wait_until 30 _cluster_ok $CLUSTER_PORTS
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(echo "$output" | jq '.locks | length')" 3
	for name in "${names[@]}"; do touch "$name.release"; done
	for m in "${pids[@]}"; do rlock_wait "$m" 30; done
}

@test "--wait-replicas short, -k on two masters: the line names the lock and its master (host:port)" {
	local m1 m2 a b first port
	m1=$(cluster_masters | sed -n 1p)
	m2=$(cluster_masters | sed -n 2p)
	a=$(name_on "$m1")
	b=$(name_on "$m2")
	first=$(printf '%s\n' "$a" "$b" | LC_ALL=C sort | head -1) # taken first (sorted)
	port=$(cluster_owner "rlock:{$first}")
	# each master has one replica: 2 cannot acknowledge
	run -69 --separate-stderr rlock --wait-replicas 2 --io-timeout 2s -k "$a" -k "$b" \
		-- touch ran
	assert_one_line_error
	# the master is named unless it is the URL's own server (that one the URL names)
	local at="127\\.0\\.0\\.1:$port: "
	[[ $port != "${REDIS_URL##*:}" ]] || at=''
	assert_regex "$stderr" "^rlock: lock '$first': ${at}only [01] of 2 replicas acknowledged the writes within 2000 ms: not running the command$"
	[[ ! -e ran ]] || fail "the command ran"
}

@test "-k on two masters, the second lock's master may evict: -v warns about that master, once a day (the marker on it)" {
	local m first second
	# neither the URL's node (where the check went) nor the first lock's master
	for m in $(cluster_masters); do
		[[ $m == "$REDIS_PORT" ]] && continue
		if [[ -z ${EVICT_PORT:-} ]]; then EVICT_PORT=$m; else first=$m; fi
	done
	[[ -n $EVICT_PORT && -n ${first:-} ]] || first=$REDIS_PORT
	# names sorted a... before z...: taken, and renewed, in that order
	first=$(cluster_name_on "$first" a)
	second=$(cluster_name_on "$EVICT_PORT" z)
	redis-cli -p "$EVICT_PORT" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
	run -0 --separate-stderr rlock -v -k "$first" -k "$second" -- true
	assert_regex "$stderr" "warning: 127\.0\.0\.1:$EVICT_PORT has maxmemory-policy allkeys-lru"
	assert_equal "$(grep -c maxmemory-policy <<<"$stderr")" 1
	# the marker lives on that master (the plain one, when that master owns its slot;
	# else with the lock's hash tag): not warned again
	[[ $(redis-cli -p "$EVICT_PORT" EXISTS rlock:eviction-warned) == 1 ||
		$(redis-cli -p "$EVICT_PORT" EXISTS "rlock:eviction-warned{$second}") == 1 ]] ||
		fail "no marker on 127.0.0.1:$EVICT_PORT"
	run -0 --separate-stderr rlock -v -k "$first" -k "$second" -- true
	[[ $stderr != *maxmemory-policy* ]] || fail "warned twice: $stderr"
}

@test "several -u URLs that are the cluster's nodes: refused, 64, one line saying to give one node's URL (issue 41)" {
	local p urls=()
	for p in $(cluster_masters); do urls+=(-u "redis://127.0.0.1:$p"); done
	run -64 --separate-stderr rlock "${urls[@]}" -k seeds -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'is a Redis Cluster node.*give one node.s URL'
	[[ ! -e ran ]]
	# nothing was taken on any master (Redlock over the masters would have)
	for p in $(cluster_masters); do
		[[ $(redis-cli -c -p "$p" EXISTS 'rlock:{seeds}') == 0 ]] || fail "a lock was left on $p"
	done
	run -64 --separate-stderr rlock "${urls[@]}" --status -k seeds
	assert_regex "$stderr" 'is a Redis Cluster node'
	run -64 rlock "${urls[@]}" --check # the run's rule: bad-url
	assert_regex "$output" "unsafe .* reach: .*is a Redis Cluster node.*give one node.s URL"
	assert_line --regexp '^verdict: bad-url '
	# one node's URL is the Cluster, as before
	run -0 rlock -u "redis://127.0.0.1:$(cluster_masters | head -1)" -k seeds -- true
}

@test "a database in a Cluster node's URL (/2): 64, one line saying a Cluster has only database 0, in every mode; --check's finding says so (not unreachable)" {
	# Redis answers SELECT 2 with "ERR SELECT is not allowed in cluster mode": the
	# user's URL, not a server that is down (69) nor one to wait for.
	local p u m redlock=()
	p=$(cluster_masters | head -1)
	u="redis://127.0.0.1:$p/2"
	for m in $(cluster_masters | tail -n +2); do redlock+=(-u "redis://127.0.0.1:$m/2"); done
	local mode
	for mode in "-k db -- touch ran" "-k db -w 20s -- touch ran" "-k db --status" "--list" \
		"-k db --acquire" "${redlock[*]} -k db -w 20s -- touch ran"; do
		# shellcheck disable=SC2086 # the mode's words
		run --separate-stderr timeout -k 5 20 "$RLOCK" -u "$u" $mode
		assert_equal "$status" 64
		assert_one_line_error
		assert_regex "$stderr" "^rlock: database 2 in the URL: 127.0.0.1:$p is a Redis Cluster node, and a Cluster has only database 0"
	done
	run -64 --separate-stderr timeout -k 5 20 "$RLOCK" -u "$u" --check
	assert_output --partial 'fix: name a database the server has in the URL (a Redis Cluster has only database 0)'
	assert_output --partial 'verdict: bad-url'
	[[ ! -e ran ]]
}

@test "--check as the least-privilege ACL user of docs/production.md: every master's cluster and acl findings ok (CLUSTER SLOTS, a throwaway key in its own slots)" {
	local p acl
	# the line from the doc itself (as credentials.bats takes it): CLUSTER SLOTS, no CLUSTER INFO
	acl=$(sed -n 's/^ *ACL SETUSER locker reset on >PASSWORD //p' "$RLOCK_SOURCE_DIR/docs/production.md")
	[[ -n $acl ]]
	ACL_USERS='locker noincr'
	for p in $CLUSTER_PORTS; do
		# shellcheck disable=SC2086  # a list of ACL rules
		redis-cli -p "$p" ACL SETUSER locker reset on '>lk-pw-9' $acl >/dev/null
		# shellcheck disable=SC2086
		redis-cli -p "$p" ACL SETUSER noincr reset on '>lk-pw-9' ${acl/+incr /} >/dev/null
	done
	RLOCK_PASSWORD=lk-pw-9 run --separate-stderr rlock --user locker --check
	# CONFIG GET is refused to it (persistence: warn), nothing is unsafe
	assert_equal "$status" 1
	! grep -q '^unsafe ' <<<"$output" || fail "unsafe: $output"
	(($(grep -Ec '^ok +127\.0\.0\.1:[0-9]+ cluster: every slot served, 3 master' <<<"$output") == 3)) ||
		fail "not every master's slots read from CLUSTER SLOTS: $output"
	(($(grep -Ec "^ok +127\.0\.0\.1:[0-9]+ acl: user 'locker' has the rights rlock uses \(tried on a throwaway key\)" <<<"$output") == 3)) ||
		fail "the rights not tried on every master: $output"
	# a right refused inside the scripts is found on every master
	RLOCK_PASSWORD=lk-pw-9 run -2 --separate-stderr rlock --user noincr --check
	(($(grep -Ec "^unsafe +127\.0\.0\.1:[0-9]+ acl: user 'noincr' lacks incr \(tried on a throwaway key\)" <<<"$output") == 3)) ||
		fail "incr not found missing on every master: $output"
}

@test "an ACL user without +cluster|slots: --list is 69 with one line (not one master's locks as the listing); locks on every master still work" {
	local p acl m
	acl=$(sed -n 's/^ *ACL SETUSER locker reset on >PASSWORD //p' "$RLOCK_SOURCE_DIR/docs/production.md")
	[[ $acl == *'+cluster|slots'* ]]
	ACL_USERS=noslots
	for p in $CLUSTER_PORTS; do
		# shellcheck disable=SC2086  # a list of ACL rules
		redis-cli -p "$p" ACL SETUSER noslots reset on '>lk-pw-9' ${acl/+cluster|slots/} >/dev/null
	done
	# a lock on every master (the URL's node's too): each taken and released through MOVED
	for m in $(cluster_masters); do
		RLOCK_PASSWORD=lk-pw-9 run -0 rlock --user noslots -n -k "$(name_on "$m")" -- true
	done
	rlock_bg -k "$(name_on "$(cluster_masters | grep -vx "$REDIS_PORT" | head -1)")" -- "$HOLD" a
	wait_until 30 test -e a.started
	RLOCK_PASSWORD=lk-pw-9 run -69 --separate-stderr rlock --user noslots --list
	assert_output ''
	assert_one_line_error
	assert_regex "$stderr" 'CLUSTER SLOTS refused .*\+cluster\|slots'
	touch a.release
	rlock_wait "$RLOCK_PID" 30
}

@test "the lost-update checker finds no overlap against the cluster" {
	run -0 "$CHECK" -p 4 -i 10 -k lu --rlock "$RLOCK"
	echo "# $output" >&3
}

@test "a slot no master serves (CLUSTERDOWN): exit 69 with one clear line" {
	local name slot
	name=$(name_on "$REDIS_PORT")
	slot=$(redis-cli -p "$REDIS_PORT" CLUSTER KEYSLOT "rlock:{$name}")
	redis-cli -p "$REDIS_PORT" CLUSTER DELSLOTS "$slot" >/dev/null
	run -69 --separate-stderr rlock -n -k "$name" -- true
	redis-cli -p "$REDIS_PORT" CLUSTER ADDSLOTS "$slot" >/dev/null
	assert_one_line_error
	[[ $stderr == *CLUSTERDOWN* ]]
	# shellcheck disable=SC2086 # one port a word
	wait_until 30 _cluster_ok $CLUSTER_PORTS
	run -0 rlock -k "$name" -- true
}

@test "resharding: a lock whose slot moves to another master is released there" {
	local m to name pid slot p
	m=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$m" | head -1)
	name=$(name_on "$m")
	slot=$(redis-cli -p "$m" CLUSTER KEYSLOT "rlock:{$name}")
	rlock_bg -k "$name" -- "$HOLD" a
	pid=$RLOCK_PID
	wait_until 30 test -e a.started
	# move the slot as `redis-cli --cluster reshard` does (the target's script cache
	# empty: NOSCRIPT there, then EVAL). While the slot migrates, Redis refuses the
	# multi-key scripts with TRYAGAIN (ASK only for commands whose keys all moved); the
	# status is read key by key then, on the node that has the lock's keys.
	redis-cli -p "$to" SCRIPT FLUSH >/dev/null
	redis-cli -p "$to" CLUSTER SETSLOT "$slot" IMPORTING "$(redis-cli -p "$m" CLUSTER MYID)"
	redis-cli -p "$m" CLUSTER SETSLOT "$slot" MIGRATING "$(redis-cli -p "$to" CLUSTER MYID)"
	redis-cli -p "$m" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS "rlock:{$name}" \
		"rlock:{$name}:owner" "rlock:{$name}:fence"
	run -75 --separate-stderr rlock -k "$name" --status
	[[ -z $stderr ]] || fail "$stderr"
	for p in $(cluster_masters); do
		redis-cli -p "$p" CLUSTER SETSLOT "$slot" NODE "$(redis-cli -p "$to" CLUSTER MYID)"
	done
	touch a.release
	rlock_wait "$pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $RLOCK_ERR ]] || fail "release: $(cat "$RLOCK_ERR")"
	[[ $(redis-cli -p "$to" EXISTS "rlock:{$name}" "rlock:{$name}:owner") == 0 ]]
	run -0 rlock -k "$name" -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 2
}

# Last: it changes the topology (a replica becomes master).
@test "CLUSTER FAILOVER while held: the renewal follows the new master" {
	local m name replica pid
	m=$(cluster_masters | grep -vx "$REDIS_PORT" | head -1)
	name=$(name_on "$m")
	replica=$(cluster_replica_of "$m")
	rlock_bg -k "$name" -t 3s -- "$HOLD" a
	pid=$RLOCK_PID
	wait_until 30 test -e a.started
	cluster_failover "$replica"
	renewed_reset
	wait_until 30 renewed 2 "rlock:{$name}" redis-cli -p "$replica"
	touch a.release
	rlock_wait "$pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ $(redis-cli -p "$replica" EXISTS "rlock:{$name}") == 0 ]]
}

# renewed_or_gone PID PORT KEY: for wait_until: the rlock PID has ended, or KEY's PTTL
# on PORT went up once (a renewal) since renewed_reset.
renewed_or_gone() {
	! proc_alive "$1" || renewed 1 "$3" redis-cli -p "$2"
}

# Last: it kills a master for good (its replica is promoted after cluster-node-timeout).
@test "a master crashes while held (SIGKILL), --wait-replicas 1: kept or 79, never two holders" {
	local m name replica mpid a_pid b_pid t0 a_err b_err
	m=$(cluster_masters | grep -vx "$REDIS_PORT" | head -1)
	name=$(name_on "$m")
	replica=$(cluster_replica_of "$m")
	[[ -n $replica ]] || fail "master $m has no replica"
	# --wait-replicas 1: the replica has the key before the command starts
	rlock_bg -v --wait-replicas 1 -k "$name" -t 20s -- "$HOLD" a
	a_pid=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 test -e a.started
	# a waiter on the same lock, queued before the crash
	rlock_bg -v -w 90s -k "$name" -- sh -c 'kill -0 "$(cat a.pid)" 2>/dev/null && touch b.overlap
		touch b.started'
	b_pid=$RLOCK_PID b_err=$RLOCK_ERR
	# (waiting: a first attempt that finds no master is 69 at once, as documented)
	wait_until 30 grep -q 'busy.*waiting' "$b_err"
	mpid=$(redis-cli -p "$m" INFO server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
	[[ -n $mpid ]]
	t0=$(now_ms)
	kill -KILL "$mpid"
	# a new rlock before the promotion (the node timeout is 3 s): 69, one line that
	# names the node it could not reach (not "more than 5 redirects"), or CLUSTERDOWN
	# once the cluster has marked the node failed
	run -69 --separate-stderr rlock -n -k "$name" -- true
	echo "# during the outage: $stderr" >&3
	assert_one_line_error
	[[ $stderr == *"127.0.0.1:$m"* || $stderr == *CLUSTERDOWN* ]]
	# --list too: its line names the master it could not scan, never "the lock's server"
	# (no lock is asked for); exit 0 only once the replica took the master's place
	run --separate-stderr rlock --connect-timeout 300ms --list
	echo "# --list during the outage ($status): $stderr" >&3
	if ((status == 69)); then
		assert_one_line_error
		[[ $stderr == *"127.0.0.1:$m"* ]] || fail "no server named: $stderr"
		[[ $stderr != *"lock's server"* ]] || fail "said the lock's server: $stderr"
	else
		assert_equal "$status" 0
		cluster_is_master "$replica" || fail "--list answered without the master: $output"
	fi
	wait_until 60 cluster_is_master "$replica"
	echo "# replica promoted $(($(now_ms) - t0)) ms after the master's SIGKILL (node timeout 3 s, lease 20 s)" >&3
	# the holder either renews on the promoted replica or has found the lease lost (79)
	renewed_reset
	wait_until 40 renewed_or_gone "$a_pid" "$replica" "rlock:{$name}"
	touch a.release
	rlock_wait "$a_pid" 30
	cat "$a_err"
	if ((RLOCK_STATUS == 79)); then
		grep -q lost "$a_err"
		echo "# the holder lost the lock in the crash: exit 79" >&3
	else
		assert_equal "$RLOCK_STATUS" 0
		echo "# the holder kept the lock on the promoted replica: exit 0" >&3
	fi
	# the waiter gets the lock afterwards, never while the holder's command runs
	rlock_wait "$b_pid" 60
	cat "$b_err"
	assert_equal "$RLOCK_STATUS" 0
	[[ -e b.started && ! -e b.overlap ]]
}

@test "cluster: --lock-delay keeps a name closed after a crash (its slot's node), --status and --list say so" {
	rlock_bg -k cd -t 1s --lock-delay 30s -- "$HOLD" h
	wait_until 10 test -e h.started
	kill -KILL "$RLOCK_PID"
	rlock_wait "$RLOCK_PID" 20 || true
	wait_until 10 bash -c '"$0" --status --json -k cd | grep -q "\"held\":false.*\"closed\""' "$RLOCK"
	run -75 --separate-stderr "$RLOCK" -n -k cd -- true
	[[ $stderr == *"closed by lock-delay"* ]]
	run -0 "$RLOCK" --list
	assert_output --partial '[closed by lock-delay until'
}
