#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: for the command rlock runs; bats sets $output, $stderr (run in each test, a subshell)
# Redis Cluster, a lock's slot migrated by hand while the lock is in use (SPEC §8; man
# PROTOCOL): CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE of the lock's keys, SETSLOT
# NODE, the steps `redis-cli --cluster reshard` takes. One 3-master cluster for the
# file (test/cluster.bash). Documented: the holder's renewal and release follow ASK
# (with ASKING) and then MOVED; a new acquire while the slot migrates is refused by
# Redis with TRYAGAIN (the scripts declare several keys, not all present): rlock tries
# again for about 1.5 s (a slot with few keys moves in milliseconds), then exit 69
# with one line; a waiter is woken by the release on the slot's new owner. A status
# (--status, --list, --held, a nested rlock's re-entry check) is read key by key on the
# node that has the name's keys; --break and --reset say in one line they cannot (69).

load helpers
load cluster

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	cluster_start
}

teardown_file() { redis_stop_all; }

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
}

teardown() {
	common_teardown
	# a test that made the masters name nodes by host name, and failed before it
	# named them by IP again
	if [[ -e $BATS_FILE_TMPDIR/endpoint.hostname ]]; then
		endpoint_type ip
	fi
}

# endpoint_type ip|hostname: how every master names nodes in redirects and the slot map
# (cluster-preferred-endpoint-type); 1 when a server has no such setting.
endpoint_type() {
	local p
	for p in $(cluster_masters); do
		redis-cli -p "$p" CONFIG SET cluster-preferred-endpoint-type "$1" | grep -qx OK || return 1
	done
	if [[ $1 == hostname ]]; then touch "$BATS_FILE_TMPDIR/endpoint.hostname"; else rm -f "$BATS_FILE_TMPDIR/endpoint.hostname"; fi
}

# name_on PORT: a lock name whose keys live on the master at PORT (not used before in
# this file: each test moves its name's slot).
name_on() { cluster_name_on "$1" "m$BATS_TEST_NUMBER-"; }

# asking PORT CMD...: CMD on the node at PORT after ASKING (the importing node serves
# the slot only so), one connection; prints CMD's reply.
asking() {
	local port=$1
	shift
	printf 'ASKING\n%s\n' "$*" | redis-cli -p "$port" | tail -1
}

# migrate_start SLOT FROM TO / migrate_keys FROM TO KEY... / migrate_end SLOT TO:
# the three steps of a slot migration, as `redis-cli --cluster reshard` does them.
migrate_start() {
	redis-cli -p "$3" CLUSTER SETSLOT "$1" IMPORTING "$(redis-cli -p "$2" CLUSTER MYID)" >/dev/null
	redis-cli -p "$2" CLUSTER SETSLOT "$1" MIGRATING "$(redis-cli -p "$3" CLUSTER MYID)" >/dev/null
}
migrate_keys() {
	local from=$1 to=$2
	shift 2
	[[ $(redis-cli -p "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 KEYS "$@") == OK ]]
}
migrate_end() {
	local p id
	id=$(redis-cli -p "$2" CLUSTER MYID)
	# the new owner first, then the others (the old owner among them)
	for p in "$2" $(cluster_masters | grep -vx "$2"); do
		[[ $(redis-cli -p "$p" CLUSTER SETSLOT "$1" NODE "$id") == OK ]] || return 1
	done
}

# renewed_at N KEY PORT: for wait_until, KEY's PTTL on the importing node at PORT rose
# N times (renewals that reached it through ASK).
renewed_at() {
	local p
	p=$(asking "$3" PTTL "$2")
	[[ $p =~ ^-?[0-9]+$ ]] || return 1
	if ((_renew_last >= 0 && p > _renew_last)); then
		_renew_ups=$((_renew_ups + 1))
	fi
	_renew_last=$p
	((_renew_ups >= $1))
}

# held_then_migrating: a holder (pid, its rlock) of a name (key, slot) on the first
# master (from), with -t 3s (renewed every second, so renewals must cross every step of
# the migration); once its command started, the slot starts migrating to another master
# (to). Sets the caller's from, to, name, key, slot and pid.
held_then_migrating() {
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	rlock_bg -k "$name" -t 3s -- "$HOLD" a
	pid=$RLOCK_PID
	wait_until 30 test -e a.started
	migrate_start "$slot" "$from" "$to"
}

@test "held across a migration: renewal and release follow ASK; a new acquire meanwhile is 69 (TRYAGAIN), takes nothing" {
	local from to name key slot pid
	held_then_migrating
	# (b) the keys still on the old owner, the slot migrating: Redis answers TRYAGAIN,
	# and goes on so (the migration does not end): 69 after the pauses
	local t0=$EPOCHREALTIME
	run -69 --separate-stderr rlock -n -k "$name" -- touch ran
	echo "# TRYAGAIN tried again for $(((${EPOCHREALTIME/./} - ${t0/./}) / 1000)) ms, then 69" >&3
	assert_one_line_error
	[[ $stderr == *TRYAGAIN* ]] || fail "not TRYAGAIN: $stderr"
	# the keys moved, the slot still migrating: the old owner answers ASK; the
	# renewal follows it (ASKING) to the importing node and extends the lease there
	migrate_keys "$from" "$to" "$key" "$key:owner" "$key:fence"
	[[ $(redis-cli -p "$from" EXISTS "$key") == ASK* ]] # gone from the old owner
	renewed_reset
	wait_until 30 renewed_at 2 "$key" "$to"
	# (b) again, now that the old owner redirects: ASK, then TRYAGAIN on the new one
	run -69 --separate-stderr rlock -n -k "$name" -- touch ran
	assert_one_line_error
	[[ $stderr == *TRYAGAIN* ]] || fail "not TRYAGAIN: $stderr"
	[[ ! -e ran ]]
	[[ $(asking "$to" GET "$key:fence") == 1 ]] || fail "a refused acquire counted a fence"
	# (a) the release, still mid-migration, follows ASK too: gone from the new owner
	touch a.release
	rlock_wait "$pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $RLOCK_ERR ]] || fail "holder: $(cat "$RLOCK_ERR")"
	[[ $(asking "$to" EXISTS "$key") == 0 ]] || fail "left on $to"
	[[ $(asking "$to" EXISTS "$key:owner") == 0 ]] || fail "owner left on $to"
	[[ $(redis-cli -p "$from" CLUSTER NODES | grep -c "\[$slot->-") == 1 ]] ||
		fail "the slot was no longer migrating"
	migrate_end "$slot" "$to"
	run -0 rlock -k "$name" -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 2
	[[ $(redis-cli -p "$to" GET "$key:fence") == 2 ]]
}

@test "a waiter across a migration: the renewal follows MOVED, the release on the new owner wakes the waiter" {
	local from to name key slot a_pid b_pid b_err
	from=$(cluster_masters | tail -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	rlock_bg -k "$name" -t 3s -- "$HOLD" a
	a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -vv -k "$name" -- sh -c 'date +%s%3N >b.start'
	b_pid=$RLOCK_PID
	b_err=$RLOCK_ERR
	wait_until 30 waiting_on "$from"
	migrate_start "$slot" "$from" "$to"
	migrate_keys "$from" "$to" "$key" "$key:owner" "$key:fence" "$key:waiters"
	migrate_end "$slot" "$to"
	# the old owner redirects the waiter's blocked BLPOP (the slot left it); the waiter
	# tries again, on the new owner, takes a place there and blocks there
	wait_until 30 waiting_on "$to"
	renewed_reset
	wait_until 30 renewed 2 "$key" redis-cli -p "$to"
	touch a.release
	rlock_wait "$a_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	(($(cat b.start) >= $(cat a.end)))
	echo "# hand-off after the migration ms: $(($(cat b.start) - $(cat a.end)))" >&3
	grep -q 'woken by the release' "$b_err" || fail "not woken by the release: $(cat "$b_err")"
	[[ $(redis-cli -p "$to" GET "$key:fence") == 2 ]]
	[[ $(redis-cli -p "$to" EXISTS "$key") == 0 ]]
}

@test "a new acquire while the slot migrates tries again and takes the lock when the migration ends" {
	local from to name key slot pid t0
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | tail -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	run -0 rlock -k "$name" -- true # the fence counter exists: 1
	migrate_start "$slot" "$from" "$to"
	rlock_bg -vv -k "$name" -- sh -c 'echo "$RLOCK_FENCE" >fence'
	pid=$RLOCK_PID
	wait_until 30 grep -q 'TRYAGAIN.*trying again' "$RLOCK_ERR"
	migrate_keys "$from" "$to" "$key:fence"
	migrate_end "$slot" "$to"
	t0=$EPOCHREALTIME
	rlock_wait "$pid" 30
	echo "# acquired $(((${EPOCHREALTIME/./} - ${t0/./}) / 1000)) ms after the migration ended" >&3
	assert_equal "$RLOCK_STATUS" 0
	[[ $(cat fence) == 2 ]]
	[[ $(redis-cli -p "$to" GET "$key:fence") == 2 ]]
}

# migrate_abort SLOT FROM TO: the slot stable again on its old owner (the keys never moved).
migrate_abort() {
	redis-cli -p "$3" CLUSTER SETSLOT "$1" STABLE >/dev/null
	redis-cli -p "$2" CLUSTER SETSLOT "$1" STABLE >/dev/null
}

# held_while_migrating OPTION...: a holder with OPTION... on a name of the first master
# whose slot starts migrating (to the second) while the holder runs; every key of the
# name stays on the old owner (a `--cluster reshard` that stopped, or has not reached
# it). Renewed twice there (the key the renewal extends: the lock, or :holders), then
# released; the slot is made stable again after. Sets name key from to, and leaves the
# holder's status in RLOCK_STATUS and its stderr in $RLOCK_ERR. Issue 41: the scripts
# touch keys they do not declare, refused on that node when not there.
held_while_migrating() {
	local slot renew_key
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	renew_key=$key
	[[ " $* " != *" -s "* && " $* " != *" -l "* ]] || renew_key=$key:holders
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	rlock_bg "$@" -k "$name" -t 3s -- "$HOLD" a
	wait_until 30 test -e a.started
	migrate_start "$slot" "$from" "$to"
	renewed_reset
	wait_until 30 renewed 2 "$renew_key" redis-cli -p "$from"
	touch a.release
	rlock_wait "$RLOCK_PID" 30
	migrate_abort "$slot" "$from" "$to"
}

# released_whole: the holder exited 0 with nothing on stderr, and its lock is gone.
released_whole() {
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $RLOCK_ERR ]] || fail "holder: $(cat "$RLOCK_ERR")"
	[[ $(redis-cli -p "$from" EXISTS "$key" "$key:owner" "$key:holders") == 0 ]] ||
		fail "left on $from: $(redis-cli -p "$from" --scan --pattern "$key*" | tr '\n' ' ')"
}

@test "slot left MIGRATING, keys on the old owner: --preemptible renews and releases (issue 41)" {
	held_while_migrating --preemptible
	released_whole
}

@test "slot left MIGRATING, keys on the old owner: --fair, -s, -l 2 and --lock-delay release whole, no warning (issue 41)" {
	local opt
	for opt in --fair -s "-l 2" "--lock-delay 30s"; do
		echo "# $opt" >&3
		# shellcheck disable=SC2086  # -l 2: two words
		held_while_migrating $opt
		released_whole
		# --lock-delay: released, so the name opens at once (its entry gone)
		[[ $(redis-cli -p "$from" ZCARD "$key:delay") == 0 ]] || fail "the lock-delay entry is left"
		rm -f a.*
	done
}

@test "slot left MIGRATING, keys on the old owner: the history (on by default) gets the run's end record (issue 41)" {
	held_while_migrating
	released_whole
	redis-cli -p "$from" XREVRANGE "$key:history" + - COUNT 1 | grep -qx released ||
		fail "no end record: $(redis-cli -p "$from" XREVRANGE "$key:history" + - COUNT 2 | tr '\n' ' ')"
}

@test "slot left MIGRATING, keys on the old owner: --once-per cannot write its mark there: nothing half done, and it says so (issue 41)" {
	held_while_migrating --once-per 1h
	# refused whole: the lock, its record and its open run are as they were; no end
	# record (the lock expires by its TTL; the next acquire records the run expired)
	[[ $(redis-cli -p "$from" EXISTS "$key" "$key:owner" "$key:history:run") == 3 ]] ||
		fail "half a release: $(redis-cli -p "$from" --scan --pattern "$key*" | tr '\n' ' ')"
	if redis-cli -p "$from" XREVRANGE "$key:history" + - COUNT 1 | grep -qx released; then
		fail "an end record for a run whose lock is still there"
	fi
	assert_equal "$RLOCK_STATUS" 0
	grep -q 'not marked done' "$RLOCK_ERR" || fail "not said: $(cat "$RLOCK_ERR")"
	# the migration ends (every key moved): the next run gets the lock on the new owner,
	# runs, and marks the name done there
	local slot
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	migrate_start "$slot" "$from" "$to"
	# shellcheck disable=SC2046  # one key a word
	migrate_keys "$from" "$to" $(redis-cli -p "$from" --scan --pattern "$key*")
	migrate_end "$slot" "$to"
	run -0 --separate-stderr rlock --once-per 1h -w 10 -k "$name" -- true
	[[ $(redis-cli -p "$to" EXISTS "$key:done") == 1 ]] || fail "no mark on $to"
	run -75 rlock --once-per 1h -k "$name" -- touch ran
	[[ ! -e ran ]]
}

@test "slot migrating, only the lock-delay's key moved: a shared holder's release is refused whole or opens the name (never said released while its delay closes it)" {
	local slot
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	# -t 30s: no renewal (every 10 s) between the move and the release
	rlock_bg -s --lock-delay 1h -k "$name" -t 30s -- "$HOLD" a
	wait_until 30 test -e a.started
	[[ $(redis-cli -p "$from" ZCARD "$key:delay") == 1 ]]
	migrate_start "$slot" "$from" "$to"
	migrate_keys "$from" "$to" "$key:delay"
	touch a.release
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	# the migration ends: every key on the new owner
	# shellcheck disable=SC2046  # one key a word
	migrate_keys "$from" "$to" $(redis-cli -p "$from" --scan --pattern "$key*")
	migrate_end "$slot" "$to"
	if [[ ! -s $RLOCK_ERR ]]; then
		# said released: the name opens at once (a release removes its delay entry)
		run -0 --separate-stderr rlock -n -k "$name" -- true ||
			fail "released without a word, yet closed by its lock-delay: $stderr"
	else
		grep -q 'cannot release' "$RLOCK_ERR" || fail "holder: $(cat "$RLOCK_ERR")"
	fi
}

# looks_while_migrating OPTION...: a holder with OPTION... on a name of the first master
# whose slot starts migrating (to the second) and stays so; its command runs, for each
# `go.N` file the test creates, a --held and a nested rlock of the same name (re-entry,
# reading the same status) into nested.N, then waits for a.release. Sets name key from
# to slot pid; the holder's token in tok.
looks_while_migrating() {
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	rlock_bg "$@" -k "$name" -- env R="$RLOCK" N="$name" O="$*" sh -c 'echo "$RLOCK_TOKEN" >tok; touch a.started
		for n in 1 2; do
			i=0; while [ ! -e go.$n ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
			{ "$R" --held; echo "held=$?"; "$R" $O -k "$N" -- echo inner
				echo "nested=$?"; } >nested.$n 2>&1
		done
		i=0; while [ ! -e a.release ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done'
	pid=$RLOCK_PID
	wait_until 30 test -e a.started
	migrate_start "$slot" "$from" "$to"
}

# looked_at N: --status, --status --json, --list and the holder's own --held and nested
# rlock (go.N) see the holder, as on a stable slot; --break and --reset say in one line
# that they cannot, and change nothing.
looked_at() {
	run -75 --separate-stderr rlock -k "$name" --status
	[[ -z $stderr ]] || fail "--status: $stderr"
	run -75 --separate-stderr rlock -k "$name" --status --json
	[[ $output == *"$(cat tok)"* ]] || fail "--status --json does not name the holder: $output"
	run -0 --separate-stderr rlock --list
	[[ $output == *"$name"* ]] || fail "--list: $output $stderr"
	touch "go.$1"
	wait_until 30 grep -q '^nested=' "nested.$1"
	grep -qx 'held=0' "nested.$1" || fail "--held in the job: $(cat "nested.$1")"
	if ! grep -qx inner "nested.$1" || ! grep -qx 'nested=0' "nested.$1"; then
		fail "a nested rlock in the job: $(cat "nested.$1")"
	fi
	run -69 --separate-stderr rlock -k "$name" --break
	assert_one_line_error
	[[ $stderr == *"cannot break while the lock's Cluster slot migrates"* ]] || fail "$stderr"
	run -69 --separate-stderr rlock -k "$name" --reset
	assert_one_line_error
	[[ $stderr == *"cannot reset while the lock's Cluster slot migrates"* ]] || fail "$stderr"
	run -75 --separate-stderr rlock -k "$name" --status --json
	[[ $output == *"$(cat tok)"* ]] || fail "broken: $output"
}

@test "slot left MIGRATING: --status, --list, --held and a nested rlock read the lock on either node; --break says it cannot, in one line" {
	local opt
	for opt in -x -s; do
		echo "# $opt" >&3
		looks_while_migrating "$opt"
		# every key on the node the slot migrates from
		looked_at 1
		# every key moved, the slot still migrating: the old owner answers ASK
		# shellcheck disable=SC2046  # one key a word
		migrate_keys "$from" "$to" $(redis-cli -p "$from" --scan --pattern "$key*")
		looked_at 2
		touch a.release
		rlock_wait "$pid" 30
		assert_equal "$RLOCK_STATUS" 0
		migrate_end "$slot" "$to"
		run -0 rlock -k "$name" --status
		rm -f a.* go.* nested.* tok
	done
}

@test "slot left MIGRATING with a lock's keys on both nodes: --status says so in one line (69), never shows half" {
	from=$(cluster_masters | head -1)
	to=$(cluster_masters | grep -vx "$from" | head -1)
	name=$(name_on "$from")
	key="rlock:{$name}"
	slot=$(redis-cli -p "$from" CLUSTER KEYSLOT "$key")
	rlock_bg -k "$name" -- "$HOLD" a
	pid=$RLOCK_PID
	wait_until 30 test -e a.started
	migrate_start "$slot" "$from" "$to"
	migrate_keys "$from" "$to" "$key:fence"
	run -69 --separate-stderr rlock -k "$name" --status
	assert_one_line_error
	[[ $stderr == *"split between"* ]] || fail "$stderr"
	touch a.release
	rlock_wait "$pid" 30
	# shellcheck disable=SC2046  # one key a word
	migrate_keys "$from" "$to" $(redis-cli -p "$from" --scan --pattern "$key*")
	migrate_end "$slot" "$to"
}

# waiting_on PORT: a waiter blocks on its wake list (BLPOP) on the node at PORT.
waiting_on() {
	(($(redis-cli -p "$1" CLIENT LIST | grep -c ' flags=b .* cmd=blpop ') >= 1))
}

@test "a redirect to an unknown endpoint ('?': host names asked for, none set) goes to the host of the node that answered, as the slot map's does" {
	local from to name key slot pid
	endpoint_type hostname || skip "this server has no cluster-preferred-endpoint-type"
	held_then_migrating
	migrate_keys "$from" "$to" "$key" "$key:owner" "$key:fence"
	assert_equal "$(redis-cli -p "$from" EXISTS "$key")" "ASK $slot ?:$to"
	# the renewal follows the ASK to 127.0.0.1:$to (the host it asked), not to a host "?"
	renewed_reset
	wait_until 30 renewed_at 2 "$key" "$to"
	touch a.release
	rlock_wait "$pid" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $RLOCK_ERR ]] || fail "holder: $(cat "$RLOCK_ERR")"
	[[ $(asking "$to" EXISTS "$key") == 0 ]] || fail "left on $to"
	migrate_end "$slot" "$to"
	endpoint_type ip
}

# Last: it changes the topology (a replica becomes master).
@test "a waiter across a CLUSTER FAILOVER is woken by the release on the new master" {
	local m name key replica a_pid b_pid b_err
	m=$(cluster_masters | head -1)
	name=$(name_on "$m")
	key="rlock:{$name}"
	replica=$(cluster_replica_of "$m")
	rlock_bg -k "$name" -t 3s -- "$HOLD" a
	a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -vv -k "$name" -- sh -c 'date +%s%3N >b.start'
	b_pid=$RLOCK_PID
	b_err=$RLOCK_ERR
	wait_until 30 waiting_on "$m"
	cluster_failover "$replica"
	wait_until 30 waiting_on "$replica"
	renewed_reset
	wait_until 30 renewed 2 "$key" redis-cli -p "$replica"
	touch a.release
	rlock_wait "$a_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	echo "# hand-off after the failover ms: $(($(cat b.start) - $(cat a.end)))" >&3
	grep -q 'woken by the release' "$b_err" || fail "not woken by the release: $(cat "$b_err")"
}
