#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Re-entrance (SPEC §5, §11): a nested rlock is granted exactly what the locks its
# process tree holds already grant (every name asked for, in a mode at least as strong,
# as the server says now); it takes the rest as a normal run does, or refuses (64) what
# would wait for its own ancestor. Inherited from a parent rlock (RLOCK_KEY/RLOCK_TOKEN,
# RLOCK_KEYS/RLOCK_TOKENS) and from `eval "$(rlock --acquire)"`.

load helpers

# nested_status TAG: the status the nested run recorded in TAG.rc.
nested_status() { cat "$BATS_TEST_TMPDIR/$1.rc"; }

@test "nested -k A -k B under A: B held elsewhere is waited for (busy with -n), then taken and released; A untouched" {
	rlock_bg -k B -- "$HOLD" other
	local other=$RLOCK_PID
	wait_until 30 test -e other.started
	# The parent holds A; its command runs the nested rlock twice (-n, then waiting),
	# then holds on so that the state after the nested run can be looked at.
	rlock_bg -k A -- sh -c '
		"$RLOCK" -n -k A -k B -- touch ran-n; echo $? >n.rc
		"$RLOCK" -w 60s -k A -k B -- "$1" inner; echo $? >w.rc
		exec "$1" parent' sh "$HOLD"
	local parent=$RLOCK_PID
	wait_until 30 test -e n.rc
	assert_equal "$(nested_status n)" 75
	[[ ! -e ran-n ]] || fail "the nested -n run ran its command without taking B"
	# The waiting run waits for B, not for A: the other holder still has B.
	wait_until 30 eval '(($(waiters B) >= 1))'
	[[ ! -e inner.started ]] || fail "the nested run ran its command without taking B"
	touch other.release
	rlock_wait "$other"
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -e inner.started
	# B is the nested run's, A still the parent's (one acquisition of A in all).
	assert_equal "$(rcli GET 'rlock:{B}')" "$(env_of inner RLOCK_TOKENS | cut -d' ' -f2)"
	assert_equal "$(env_of inner RLOCK_KEYS)" 'rlock:{A} rlock:{B}'
	assert_equal "$(env_of inner RLOCK_KEY)" 'rlock:{A}'
	assert_equal "$(rcli GET 'rlock:{A}:fence')" 1
	assert_equal "$(rcli GET 'rlock:{B}:fence')" 2
	touch inner.release
	wait_until 30 test -e parent.started
	assert_equal "$(nested_status w)" 0
	# The nested run released B, and only B.
	key_absent 'rlock:{B}'
	assert_equal "$(rcli GET 'rlock:{A}')" "$(env_of parent RLOCK_TOKEN)"
	touch parent.release
	rlock_wait "$parent"
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{A}'
}

@test "mode: an exclusive hold grants a nested -s; a shared one refuses a nested exclusive (64); --limit N only N" {
	# exclusive parent, nested -s: runs directly, no second acquisition
	run -0 rlock -k A -- "$RLOCK" -n -s -k A -- sh -c 'echo "fence $RLOCK_FENCE"'
	assert_output 'fence 1'
	assert_equal "$(rcli GET 'rlock:{A}:fence')" 1
	# shared parent, nested exclusive: it would wait for its own parent
	run -0 rlock -s -k S -- sh -c '"$RLOCK" -w 30s -k S -- touch ran; echo "rc $?"'
	assert_line 'rc 64'
	assert_line --partial "lock 'S' is held shared (-s) by this process tree"
	[[ ! -e ran ]] || fail "a nested exclusive run ran under a shared hold"
	# shared parent, nested shared: runs directly
	run -0 rlock -s -k S -- "$RLOCK" -n -s -k S -- sh -c 'echo ok'
	assert_output ok
	# a permit of --limit 2: a nested -l 2 runs directly, -l 3 or exclusive is refused
	run -0 rlock -l 2 -k L -- "$RLOCK" -n -l 2 -k L -- sh -c 'echo ok'
	assert_output ok
	run -0 rlock -l 2 -k L -- sh -c '"$RLOCK" -n -l 3 -k L -- true; echo "rc $?"'
	assert_line 'rc 64'
	run -0 rlock -l 2 -k L -- sh -c '"$RLOCK" -n -k L -- true; echo "rc $?"'
	assert_line 'rc 64'
	key_absent 'rlock:{L}:holders'
}

@test "several -k: every inherited lock is known by its token (RLOCK_TOKENS), also two levels down" {
	# parent A+B; child takes C; grandchild asks B (not the child's RLOCK_KEY): direct
	run -0 rlock -k A -k B -- "$RLOCK" -n -k C -- "$RLOCK" -n -k B -- \
		sh -c 'echo "$RLOCK_KEY|$RLOCK_KEYS"'
	assert_output 'rlock:{B}|rlock:{B} rlock:{C} rlock:{A}'
	assert_equal "$(rcli GET 'rlock:{B}:fence')" 1
	key_absent 'rlock:{A}'
	key_absent 'rlock:{B}'
	key_absent 'rlock:{C}'
}

@test "from --acquire's variables: a nested -k A -k B takes B (busy while held elsewhere), leaves A to the keeper" {
	eval "$(rlock -k A --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	rlock_bg -k B -- "$HOLD" other
	wait_until 30 test -e other.started
	run -75 rlock -n -k A -k B -- touch ran
	[[ ! -e ran ]] || fail "ran without taking B"
	touch other.release
	rlock_wait
	run -0 rlock -n -k A -k B -- sh -c 'echo "$RLOCK_KEYS"'
	assert_output 'rlock:{A} rlock:{B}'
	key_absent 'rlock:{B}'
	assert_equal "$(rcli GET 'rlock:{A}')" "$RLOCK_TOKEN"
	assert_equal "$(rcli GET 'rlock:{A}:fence')" 1
	run -0 rlock -k A --release
	key_absent 'rlock:{A}'
	# a shared keeper does not grant a nested exclusive run
	eval "$(rlock -s -k S --acquire)"
	local keeper
	keeper=$(rcli HGET 'rlock:{S}:meta' "$RLOCK_TOKEN" | sed 's/.*"pid":"\{0,1\}\([0-9]*\).*/\1/')
	track_pid "$keeper"
	run -64 --separate-stderr rlock -w 30s -k S -- touch ran
	[[ ! -e ran ]] || fail "a nested exclusive run ran under a shared keeper"
	assert_one_line_error
	# SIGTERM makes the keeper release (what --release of a shared keeper does is not
	# this test's business)
	kill -TERM "$keeper"
	wait_until 30 proc_gone "$keeper"
}

@test "--acquire of a name the tree holds exclusive exits 64 (it would wait for itself); beside a shared hold it takes one" {
	run -0 rlock -k A -- sh -c '"$RLOCK" -k A -w 2s --acquire >vars; echo "rc $?"'
	assert_line 'rc 64'
	assert_line --partial "lock 'A' is held exclusive by this process tree: --acquire would wait for itself"
	# (the eval idiom's failure line, no variables of a lock of its own; the job's lock
	# stays listed)
	assert_equal "$(sed -n '$p' vars)" 'unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit 64)'
	assert_equal "$(sed -n 1p vars)" "RLOCK_KEYS='rlock:{A}'; export RLOCK_KEYS"
	key_absent 'rlock:{A}'
	# a shared hold: the keeper takes a shared hold of its own (its --release must not
	# give back the parent's)
	run -0 rlock -s -k S -- sh -c '"$RLOCK" -s -k S -n --acquire >vars; echo "rc $?"
		"$RLOCK" -k S --status >status; echo "status $?"'
	assert_line 'rc 0'
	grep -q 'held by 2 shared holders' status || fail "status: $(cat status)"
	local keeper token
	token=$(sed -n "s/^RLOCK_TOKEN='\(.*\)'; export RLOCK_TOKEN$/\1/p" vars)
	keeper=$(rcli HGET 'rlock:{S}:meta' "$token" | sed 's/.*"pid":"\{0,1\}\([0-9]*\).*/\1/')
	track_pid "$keeper"
	kill -TERM "$keeper"
	wait_until 30 proc_gone "$keeper"
	wait_until 30 key_absent 'rlock:{S}:holders'
}

@test "a shared hold beyond the 32 holders --status lists is still found (nested exclusive: 64)" {
	# 33 other shared holders whose leases end before the parent's: the status lists
	# them first, and the parent's token is not among the 32 it keeps
	local t now i
	t=$(rcli TIME | tr '\n' ' ')
	now=$(($(cut -d' ' -f1 <<<"$t") * 1000))
	rcli SET 'rlock:{S}:limit' shared PX 60000 >/dev/null
	for ((i = 0; i < 33; i++)); do
		rcli ZADD 'rlock:{S}:holders' $((now + 20000)) "$(printf 'f%031x' "$i")" >/dev/null
	done
	rcli PEXPIRE 'rlock:{S}:holders' 60000 >/dev/null
	run -0 rlock -s -t 40s -k S -- sh -c '"$RLOCK" -k S -w 2s -- touch ran; echo "rc $?"
		"$RLOCK" -n -s -k S -- sh -c "echo fence \$RLOCK_FENCE"'
	assert_line 'rc 64'
	assert_line 'fence 1'
	[[ ! -e ran ]] || fail "a nested exclusive run ran under a shared hold"
	assert_equal "$(rcli GET 'rlock:{S}:fence')" 1
}

@test "a nested run re-entered whole honours its own --max-hold as timeout(1): its command's group stopped after DUR, 124 (137 when it took SIGKILL); the lock stays the parent's" {
	# The command leaves a background child in its group: --max-hold stops the group.
	rlock_bg -k A -- sh -c '
		"$RLOCK" -k A --max-hold 1s -- sh -c "sleep 60 & echo \$! >bg.pid; echo \$\$ >cmd.pid; wait"
		echo $? >term.rc
		"$RLOCK" -k A --max-hold 1s --kill-after 300ms -- sh -c "trap \"\" TERM; echo \$\$ >stubborn.pid; while :; do sleep 0.05; done"
		echo $? >kill.rc
		exec "$1" parent' sh "$HOLD"
	local parent=$RLOCK_PID
	wait_until 30 test -e parent.started
	track_pidfile bg.pid
	track_pidfile cmd.pid
	track_pidfile stubborn.pid
	assert_equal "$(nested_status term)" 124 # main: 0 after 60 s (the test's timeout)
	assert_equal "$(nested_status kill)" 137
	pidfile_gone bg.pid || fail "the nested command's background child outlived --max-hold"
	pidfile_gone stubborn.pid
	# the parent's lock all along: one acquisition, still its token
	assert_equal "$(rcli GET 'rlock:{A}:fence')" 1
	assert_equal "$(rcli GET 'rlock:{A}')" "$(env_of parent RLOCK_TOKEN)"
	touch parent.release
	rlock_wait "$parent"
	assert_equal "$RLOCK_STATUS" 0
}

@test "under --acquire's variables, a nested run's --max-hold stops its command (124); --preemptible re-entered whole is refused (64)" {
	eval "$(rlock -k A --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	local t0
	t0=$(now_ms)
	run -124 rlock -k A --max-hold 1s -- sleep 60
	(($(now_ms) - t0 < 30000)) || fail "the command was not stopped at --max-hold"
	assert_output --partial -- '--max-hold is over'
	run -64 rlock -k A --preemptible -- touch ran
	assert_output --partial 'give --preemptible to the rlock that holds it'
	[[ ! -e ran ]]
	assert_equal "$(rcli GET 'rlock:{A}')" "$RLOCK_TOKEN"
	run -0 rlock -k A --release
}

# vars_of FILE NAME: the value of NAME in FILE (lines NAME=VALUE, as env prints them).
vars_of() { sed -n "s/^$2=//p" "$1"; }

@test "a token whose holder died is not re-entered (nobody renews its lease): -n is busy (75), a wait takes the lock anew" {
	# the parent's variables outlive it in a process that left its cover (a daemon, a
	# later CI step): its lease lives on until the TTL, renewed by nobody
	rlock_bg -t 10s -k D -- sh -c 'env | grep "^RLOCK_" >vars; touch started; exec sleep 60'
	local parent=$RLOCK_PID
	wait_until 30 test -e started
	kill -KILL "$parent"
	wait_until 30 proc_gone "$parent"
	key_exists 'rlock:{D}'
	RLOCK_KEY=$(vars_of vars RLOCK_KEY) RLOCK_TOKEN=$(vars_of vars RLOCK_TOKEN) \
		RLOCK_FENCE=$(vars_of vars RLOCK_FENCE) run -75 --separate-stderr rlock -n -k D -- touch ran
	[[ ! -e ran ]] || fail "ran under a lease nobody renews"
	assert_regex "$stderr" "lock 'D': the inherited token's holder \(pid $parent\) is gone and nobody renews its lease: not re-entrant, taking the lock anew"
	# waiting: taken anew once the dead holder's lease ends (fence 2)
	RLOCK_KEY=$(vars_of vars RLOCK_KEY) RLOCK_TOKEN=$(vars_of vars RLOCK_TOKEN) \
		RLOCK_FENCE=$(vars_of vars RLOCK_FENCE) run -0 rlock -q -w 30s -k D -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 2
}

@test "a dead keeper's variables are not re-entered: -n is busy (75)" {
	eval "$(rlock -t 10s -k K --acquire)"
	local keeper
	keeper=$(rcli HGET 'rlock:{K}:owner' pid)
	track_pid "$keeper"
	# alive: re-entered
	run -0 rlock -n -k K -- sh -c 'echo "$RLOCK_FENCE"'
	assert_output 1
	kill -KILL "$keeper"
	wait_until 30 proc_gone "$keeper"
	run -75 --separate-stderr rlock -n -k K -- touch ran
	[[ ! -e ran ]] || fail "ran under a dead keeper's lease"
	assert_regex "$stderr" "the inherited token's holder \(pid $keeper\) is gone"
}

@test "a nested run's RLOCK_FENCE is the fence the server holds for the inherited token, not a garbled or missing variable's" {
	run -0 rlock -k F -- true # fence 1: the parent below gets 2
	run -0 rlock -k F -- sh -c '
		echo "parent $RLOCK_FENCE"
		RLOCK_FENCE=999 "$RLOCK" -k F -- sh -c "echo \"garbled \$RLOCK_FENCE\""
		env -u RLOCK_FENCE "$RLOCK" -k F -- sh -c "echo \"missing \$RLOCK_FENCE\""
		RLOCK_FENCE="2 x" "$RLOCK" -k F -k G -- sh -c "echo \"several \$RLOCK_FENCES\""
		RLOCK_FENCE=999 "$RLOCK" -k H -- sh -c "echo \"passed on \$RLOCK_FENCES\""
		RLOCK_FENCE=999 "$RLOCK" -n -k J --acquire >acq
		grep "^RLOCK_FENCES=" acq
		eval "$(cat acq)" && "$RLOCK" -k J --release'
	assert_line 'parent 2'
	assert_line 'garbled 2'
	assert_line 'missing 2'
	# F inherited (2), G taken here (its first fence)
	assert_line 'several 2 1'
	# F only passed on, by a nested run or --acquire: its fence is the server's too
	assert_line 'passed on 1 2'
	assert_line "RLOCK_FENCES='1 2'; export RLOCK_FENCES"
}

@test "a server that cannot answer as a nested run asks about its inherited token (CLIENT PAUSE) is asked again within the wait: re-entered, not a wait for its own ancestor" {
	# Before: the question timed out, the run went on as a normal one and waited for
	# the lock its own parent holds (75 at -w; without -w, for ever).
	run -0 --separate-stderr rlock -k P -- sh -c '
		redis-cli -p "$REDIS_PORT" CLIENT PAUSE 1500 WRITE >/dev/null
		"$RLOCK" --io-timeout 300ms -w 10s -k P -- sh -c "echo \"nested \$RLOCK_FENCE\""'
	assert_output 'nested 1'
	assert_regex "$stderr" "lock 'P': cannot tell whether the inherited token holds it \(.*\); retrying until the --wait deadline"
	assert_regex "$stderr" "lock 'P': 127\.0\.0\.1:$REDIS_PORT answers again after [0-9.]+ s"
}

@test "more inherited locks than one rlock takes (32): every one is checked; past the 32th, a stale pair is dropped and a live one re-entered, found by --held and --release" {
	# A tree of nested runs can hold more names than one run takes (2 x 16 -k). The pairs
	# past 32 were passed on unchecked (a stale one too), a nested run of a name held
	# there waited for its own ancestor (75 with -n), --held -k and --release -k did not
	# find its token, and --held exited 69.
	local keys='' tokens='' fences='' i stale live
	for i in $(seq 1 33); do
		keys+="${keys:+ }rlock:{a$i}"
		tokens+="${tokens:+ }$(printf '%032x' "$i")"
		fences+="${fences:+ }$i"
	done
	stale=$(rlock -k s -- sh -c 'echo "$RLOCK_TOKEN"') # released: stale variables
	eval "$(rlock -k L -n --acquire)"
	track_pid "$(rcli HGET 'rlock:{L}:owner' pid)"
	live=$RLOCK_TOKEN
	local -a tree=("RLOCK_KEY=rlock:{a1}" "RLOCK_TOKEN=$(printf '%032x' 1)" RLOCK_FENCE=1
		"RLOCK_KEYS=$keys rlock:{s} rlock:{L}" "RLOCK_TOKENS=$tokens $stale $live"
		"RLOCK_FENCES=$fences 1 1")
	run -0 --separate-stderr env "${tree[@]}" "$RLOCK" -n -k z -- \
		sh -c 'echo "$RLOCK_KEYS"; echo "$RLOCK_TOKENS"'
	assert_equal "${lines[0]}" "rlock:{z} $keys rlock:{L}"
	assert_equal "${lines[1]}" "${lines[1]%% *} $tokens $live"
	run -0 --separate-stderr env "${tree[@]}" "$RLOCK" -n -k L -- sh -c 'echo "$RLOCK_TOKEN"'
	assert_output "$live"
	run -0 env "${tree[@]}" "$RLOCK" --held -k L
	# --acquire lists the job's holds on, every one checked too
	run -0 --separate-stderr env "${tree[@]}" "$RLOCK" -n -k M --acquire
	track_pid "$(rcli HGET 'rlock:{M}:owner' pid)"
	assert_output --partial "rlock:{a33} rlock:{L}"
	refute_output --partial 'rlock:{s}'
	run -0 bash -c "$output"$'\n''"$RLOCK" -k M --release'
	# --held checks every inherited lock (the 33 never held: 79, a line each)
	run -79 --separate-stderr env "${tree[@]}" "$RLOCK" --held
	assert_equal "$(grep -c 'is not held by token' <<<"$stderr")" 34
	run -0 env "${tree[@]}" "$RLOCK" -k L --release
	key_absent 'rlock:{L}'
}

@test "inherited pairs no rlock wrote (a key not PREFIX{NAME}, a token not 32 hex digits) are not passed on: the command's --held judges its own lock" {
	# They were listed on to the command, whose rlock --held then refused them (64)
	local tok=0123456789abcdef0123456789abcdef
	local -a junk=(RLOCK_KEY=plain "RLOCK_TOKEN=$tok" "RLOCK_KEYS=plain rlock:{x} rlock:{B}"
		"RLOCK_TOKENS=$tok zz 0123")
	run -0 --separate-stderr env "${junk[@]}" "$RLOCK" -k B -- \
		sh -c 'echo "keys=${RLOCK_KEYS-unset}"; "$RLOCK" --held && echo held'
	assert_equal "${lines[0]}" keys=unset
	assert_equal "${lines[1]}" 'held'
	run -0 --separate-stderr env "${junk[@]}" "$RLOCK" -n -k J --acquire
	assert_line 'unset RLOCK_KEYS RLOCK_TOKENS RLOCK_FENCES'
	run -0 bash -c "$output"$'\n''"$RLOCK" -k J --release'
	# one with a newline in it shifted --acquire's lines for $GITHUB_ENV (tokens as fences)
	run -0 --separate-stderr env "RLOCK_KEYS=rlock:{x}"$'\n'"A=1 rlock:{y}" \
		"RLOCK_TOKENS=$tok $tok" "$RLOCK" -n -k J --acquire --format github
	assert_line "RLOCK_KEYS=rlock:{J} rlock:{y}"
	assert_line --regexp "^RLOCK_FENCES=[0-9]+ 0$"
	run -0 env "RLOCK_TOKEN=$(sed -n 's/^RLOCK_TOKEN=//p' <<<"$output")" "$RLOCK" -k J --release
}

@test "far more inherited locks than one rlock takes (32 + 20): each one passed on exactly once, in order; a duplicate among them once" {
	# The run must not read past what it listed while checking the pairs for duplicates
	# (it crashed, or dropped pairs).
	local keys='' tokens='' fences='' i
	for i in $(seq 1 52); do
		keys+="${keys:+ }rlock:{a$i}"
		tokens+="${tokens:+ }$(printf '%032x' "$i")"
		fences+="${fences:+ }$i"
	done
	RLOCK_KEYS="$keys rlock:{a52}" RLOCK_TOKENS="$tokens $(printf '%032x' 52)" RLOCK_FENCES="$fences 52" \
		run -0 --separate-stderr rlock -k z -- sh -c 'echo "$RLOCK_KEYS"; echo "$RLOCK_TOKENS"; echo "$RLOCK_FENCES"'
	assert_equal "${lines[0]}" "rlock:{z} $keys"
	assert_equal "${lines[1]}" "${lines[1]%% *} $tokens"
	assert_equal "${lines[2]}" "${lines[2]%% *} $fences"
}

# escaped_nested ARGS...: a holder of A whose command starts `rlock ARGS -- $HOLD inner`
# in a session of its own (setsid: out of the holder's cover; stderr in inner.err) and
# exits once that command started; returns when the holder has exited 0 (released A).
escaped_nested() {
	rlock_bg -k A -- sh -c '
		hold=$1
		shift
		setsid "$RLOCK" "$@" -- "$hold" inner </dev/null >/dev/null 2>inner.err &
		echo $! >nested.pid
		i=0; while [ ! -e inner.started ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
		exit 0' sh "$HOLD" "$@"
	local parent=$RLOCK_PID
	wait_until 30 test -e inner.started
	track_pidfile nested.pid
	track_pidfile inner.pid
	rlock_wait "$parent"
	assert_equal "$RLOCK_STATUS" 0
}

@test "a nested run that outlives its holder's release (a new session, out of its cover) is told: its command stopped, 79, never left running unprotected" {
	# The parent's command starts a nested run in a session of its own (a daemon, setsid)
	# and exits: the parent releases, though the nested command still runs under the
	# parent's token. It must learn that, stop its command and say so (79).
	escaped_nested -k A
	# released: the nested command no longer runs under the lock, and says so
	wait_until 30 pidfile_gone inner.pid
	wait_until 30 pidfile_gone nested.pid
	[[ ! -e inner.end ]] || fail "the nested command ran to its end after its holder released"
	grep -q "no longer held by the inherited token" inner.err || fail "$(cat inner.err)"
	run -0 rlock -n -k A -- true
}

# nested_under_released_keeper ARGS...: under --acquire's variables for A, `rlock ARGS --
# $HOLD inner` in the background; once its command started, the keeper is released
# (--release 0): the nested run must stop its command and exit 79 (RLOCK_ERR its stderr).
nested_under_released_keeper() {
	eval "$(rlock -k A --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	rlock_bg "$@" -- "$HOLD" inner
	local nested=$RLOCK_PID
	wait_until 30 test -e inner.started
	track_pidfile inner.pid
	run -0 rlock -k A --release
	rlock_wait "$nested"
	assert_equal "$RLOCK_STATUS" 79
	[[ ! -e inner.end ]] || fail "the nested command ran to its end after the keeper released"
}

@test "a nested run under --acquire's variables whose keeper is released meanwhile: its command stopped, 79" {
	nested_under_released_keeper -k A
	grep -q "no longer held by the inherited token" "$RLOCK_ERR" || fail "$(cat "$RLOCK_ERR")"
}

@test "a nested -k A -k B granted A (taking B) that outlives A's holder: its command stopped, 79; B released" {
	# as above, with a name of its own beside the inherited one: A is watched too
	escaped_nested -k A -k B
	wait_until 30 pidfile_gone inner.pid
	wait_until 30 pidfile_gone nested.pid
	[[ ! -e inner.end ]] || fail "the nested command ran to its end after A's holder released"
	grep -q "lock 'A' is no longer held by the inherited token" inner.err || fail "$(cat inner.err)"
	wait_until 30 key_absent 'rlock:{B}'
	# B itself was never lost: its history ends released (with the stopped command's
	# status), not lost; A's holder released it, as A's history says
	run -0 rlock -k B --history --json
	assert_output --partial '"event":"released"'
	refute_output --partial '"lost"'
}

@test "a nested run under --acquire's variables that took a name of its own: a --release of the keeper meanwhile stops its command, 79" {
	nested_under_released_keeper -k A -k B
	grep -q "lock 'A' is no longer held by the inherited token" "$RLOCK_ERR" || fail "$(cat "$RLOCK_ERR")"
	key_absent 'rlock:{B}'
}

@test "eval \"\$(rlock -k B --acquire)\" inside a job that holds A keeps A inherited: RLOCK_KEYS lists B then A; a nested -k A is re-entered, not a wait for its own ancestor; --held checks both" {
	rlock_bg -k A -- sh -c '
		eval "$("$RLOCK" -k B --acquire)" || exit 9
		"$RLOCK" -w 5s -k A -- sh -c "echo \$RLOCK_FENCE" >nested.out 2>nested.err; echo $? >nested.rc
		"$RLOCK" --held >held.out 2>&1; echo $? >held.rc
		echo "$RLOCK_KEYS" >keys
		"$RLOCK" -k B --release; echo $? >release.rc
		exec "$1" parent' sh "$HOLD"
	local parent=$RLOCK_PID
	wait_until 30 test -e parent.started
	assert_equal "$(nested_status nested)" 0
	assert_equal "$(cat nested.out)" 1 # A's fence: re-entered
	assert_equal "$(cat keys)" 'rlock:{B} rlock:{A}'
	assert_equal "$(nested_status held)" 0
	assert_equal "$(nested_status release)" 0
	key_absent 'rlock:{B}'
	touch parent.release
	rlock_wait "$parent"
	assert_equal "$RLOCK_STATUS" 0
}

@test "a failed --acquire inside a job that holds A (busy: 75) unsets RLOCK_TOKEN but keeps A in RLOCK_KEYS: a nested -k A is still re-entered" {
	rlock_bg -k B -- "$HOLD" other
	local other=$RLOCK_PID
	wait_until 30 test -e other.started
	rlock_bg -k A -- sh -c '
		eval "$("$RLOCK" -n -k B --acquire 2>/dev/null)"; echo $? >acquire.rc
		echo "${RLOCK_TOKEN-unset}" >token
		"$RLOCK" -w 5s -k A -- sh -c "echo \$RLOCK_FENCE" >nested.out 2>nested.err; echo $? >nested.rc
		exec "$1" parent' sh "$HOLD"
	local parent=$RLOCK_PID
	wait_until 30 test -e parent.started
	assert_equal "$(nested_status acquire)" 75
	assert_equal "$(cat token)" unset
	assert_equal "$(nested_status nested)" 0
	assert_equal "$(cat nested.out)" 1 # A's fence: re-entered
	touch parent.release other.release
	rlock_wait "$parent"
	rlock_wait "$other"
}

@test "--acquire -l 1 of a name the tree holds as the one permit of --limit 1 exits 64 (it would wait for itself, for ever without -w), as beside an exclusive hold; -l 2 with both permits the tree's: 64 too" {
	run -0 rlock -l 1 -k A -- sh -c '"$RLOCK" -l 1 -k A -w 3s --acquire >vars; echo "rc $?"'
	assert_line 'rc 64'
	assert_line --partial "lock 'A' is held as a permit of --limit 1 by this process tree: --acquire would wait for itself"
	assert_equal "$(sed -n '$p' vars)" 'unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE; (exit 64)'
	key_absent 'rlock:{A}:holders'
	# -l 2: the job's permit and an --acquire'd one are both the tree's; a third waits
	# for nobody but the tree
	run -0 rlock -l 2 -k A -- sh -c '
		eval "$("$RLOCK" -l 2 -k A -n --acquire)" || exit 9
		"$RLOCK" -l 2 -k A -w 3s --acquire >vars; echo "rc $?"
		"$RLOCK" -k A --release; echo "release $?"'
	assert_line 'rc 64'
	assert_line 'release 0'
	assert_line --partial "lock 'A' is held as 2 permits of --limit 2 by this process tree: --acquire would wait for itself"
	key_absent 'rlock:{A}:holders'
}

@test "eval \"\$(rlock -s -k A --acquire)\" inside a job that holds A shared keeps the job's own hold listed: after its --release, a nested exclusive -k A is refused (64), not a wait for its own ancestor; --held -k A with the job's token is 0" {
	run -0 rlock -s -k A -- sh -c '
		eval "$("$RLOCK" -s -k A -n --acquire)" || exit 9
		echo "$RLOCK_KEYS" >keys
		"$RLOCK" -k A --release; echo "release $?"
		"$RLOCK" -w 3s -k A -- true; echo "nested $?"
		"$RLOCK" -k A --token "${RLOCK_TOKENS#* }" --held; echo "held $?"'
	assert_line 'release 0'
	assert_line 'nested 64'
	assert_line --partial "lock 'A' is held shared (-s) by this process tree: asking for it exclusive would wait for itself"
	assert_line 'held 0'
	assert_equal "$(cat keys)" 'rlock:{A} rlock:{A}'
	key_absent 'rlock:{A}:holders'
}

# db1_url: the test server's database 1 (the same server, another lock of the same key).
db1_url() { if [[ $REDIS_URL == unix://* ]]; then echo "$REDIS_URL?db=1"; else echo "$REDIS_URL/1"; fi; }

@test "a nested run of the same key on another database (or server) lists the ancestor's hold beside its own: a deeper run of the ancestor's lock is re-entrant, not a wait for its own ancestor (75, or for ever)" {
	# RLOCK_KEYS carries keys, not servers: rlock:{A} of db 0 and of db 1 are one key
	# string, two locks; the pair of each is its own token's.
	run -0 rlock -k A -- sh -c '
		"$RLOCK" -u "$1" -k A -- sh -c "
			echo \"\$RLOCK_KEYS\" >keys
			\"\$RLOCK\" -n -k A -- true; echo \"db0 \$?\"
			\"\$RLOCK\" -u \"\$1\" -n -k A -- true; echo \"db1 \$?\"" sh "$1"' sh "$(db1_url)"
	assert_line 'db0 0'
	assert_line 'db1 0'
	assert_equal "$(cat keys)" 'rlock:{A} rlock:{A}'
	key_absent 'rlock:{A}'
	[[ $(rcli -n 1 EXISTS 'rlock:{A}') == 0 ]]
}

@test "variables a --release left stale in the shell: a run of that name takes it anew and lists the stale pair no longer (its server knew that token), so --held inside is 0" {
	eval "$(rlock -k A -n --acquire)"
	local stale=$RLOCK_TOKEN
	run -0 rlock -k A --release
	run -0 rlock -k A -- sh -c 'echo "$RLOCK_TOKEN ${RLOCK_TOKENS-}" >toks; "$RLOCK" --held; echo "held $?"'
	assert_line 'held 0'
	[[ $(cat toks) != *"$stale"* ]] || fail "the released token is still listed: $(cat toks)"
}

@test "another lock's stale variables in the caller's environment (a CI runner's, a finished step's): no mode passes them on to its command, so --held inside is 0" {
	eval "$(rlock -k OTHER -n --acquire)"
	local stale=$RLOCK_TOKEN
	run -0 rlock -k OTHER --release
	local mode
	for mode in "-k A" "-k A -k B" "-s -k A" "-l 2 -k A"; do
		# shellcheck disable=SC2086  # the mode's words
		run -0 rlock $mode -- sh -c 'echo "$RLOCK_KEY ${RLOCK_KEYS-} ${RLOCK_TOKENS-}" >vars; "$RLOCK" --held; echo "held $?"'
		assert_line 'held 0'
		[[ $(cat vars) != *"$stale"* && $(cat vars) != *OTHER* ]] ||
			fail "$mode: the stale pair is passed on: $(cat vars)"
	done
	# a nested run: the outer one dropped them, and the inner lists its ancestor's lock
	run -0 rlock -k A -- "$RLOCK" -k B -- sh -c 'echo "$RLOCK_KEYS" >vars; "$RLOCK" --held; echo "held $?"'
	assert_line 'held 0'
	assert_equal "$(cat vars)" 'rlock:{B} rlock:{A}'
}

@test "an ancestor's live lock not asked for stays listed beside another lock's stale variables" {
	eval "$(rlock -k OTHER -n --acquire)"
	run -0 rlock -k OTHER --release
	run -0 rlock -k A -- sh -c 'RLOCK_KEYS="$RLOCK_KEY rlock:{OTHER}" RLOCK_TOKENS="$RLOCK_TOKEN $0" RLOCK_FENCES="$RLOCK_FENCE 1" \
		"$RLOCK" -k B -- sh -c '\''echo "$RLOCK_KEYS" >vars; "$RLOCK" --held; echo "held $?"'\''' "$RLOCK_TOKEN"
	assert_line 'held 0'
	assert_equal "$(cat vars)" 'rlock:{B} rlock:{A}'
}

@test "a nested run granted every name sets RLOCK_TTL_MS from its holder's lease, never the environment's (a keeper's eval sets none)" {
	export RLOCK_TTL_MS=123
	eval "$(rlock -t 7s -k A -n --acquire)"
	track_pid "$(rcli HGET 'rlock:{A}:owner' pid)"
	run -0 rlock -k A -- sh -c 'echo "ttl=${RLOCK_TTL_MS-unset}"'
	assert_output 'ttl=7000'
	run -0 rlock -k A --release
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
	run -0 rlock -t 9s -k A -- "$RLOCK" -k A -- sh -c 'echo "ttl=${RLOCK_TTL_MS-unset}"'
	assert_output 'ttl=9000'
}
