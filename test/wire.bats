#!/usr/bin/env bats
# shellcheck disable=SC2154,SC2030,SC2031  # bats sets $stderr (run --separate-stderr); each @test is a subshell of its own
# Every request keeps its own promise over an unreliable wire (issue 34).
# A lost reply: the connection dies after the server ran a script and before its reply
# arrived; rlock sends it again on a fresh connection. Each script rlock may send twice
# recognises its own earlier effect and answers as the first call did: a retried
# release is no "lock lost" (79), a retried acquire counts the fence once.
# The fault: test/faults/proxy's `swallow PATTERN` forwards the next script call that
# holds PATTERN, throws its reply away and drops the connection.

bats_require_minimum_version 1.5.0

load helpers

setup_file() { common_setup_file; } # TCP: the proxy forwards to its port

# swallow_proxy_start: test/faults/proxy in front of the test server, mode pass. Sets
# PROXY_URL, PROXY_MODE (the mode file), PROXY_PID.
swallow_proxy_start() {
	# a test's earlier proxy would read the same mode file and write its .seen: a
	# swallow() it answered armed nothing on this one (a release went through)
	if [[ -n ${PROXY_PID:-} ]]; then
		kill "$PROXY_PID" 2>/dev/null || true
		wait_until 10 proc_gone "$PROXY_PID"
	fi
	PROXY_MODE=$BATS_TEST_TMPDIR/proxymode
	rm -f "$PROXY_MODE".* "$BATS_TEST_TMPDIR/proxyport" # the new one's port, not the old
	echo pass >"$PROXY_MODE"
	perl "$RLOCK_SOURCE_DIR/test/faults/proxy" 127.0.0.1 "$REDIS_PORT" "$PROXY_MODE" \
		"$BATS_TEST_TMPDIR/proxyport" </dev/null >"$BATS_TEST_TMPDIR/proxy.log" 2>&1 3>&- 4>&- &
	PROXY_PID=$!
	disown "$PROXY_PID"
	track_pid "$PROXY_PID"
	wait_until 10 test -s "$BATS_TEST_TMPDIR/proxyport" || return 1
	PROXY_URL=redis://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/proxyport")
}

# swallow PATTERN: arm the proxy for the next script call that holds PATTERN; returns
# once the proxy has read it.
swallow() {
	echo "swallow $1" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow $1" "$PROXY_MODE.seen"
}

swallowed() { [[ -s $PROXY_MODE.swallowed ]]; }

# past MS: the clock (now_ms) is past MS.
past() { (($(now_ms) > $1)); }

# fence_of NAME: the fence counter of lock NAME.
fence_of() { rcli GET "rlock:{$1}:fence"; }

# release_swallowed NAME RLOCK-ARGS...: a run whose release's reply is lost ends 0, the
# lock released (no "lost").
release_swallowed() {
	local name=$1
	shift
	run -0 rlock -k warm -- true # the scripts are cached: EVALSHA runs as sent
	swallow_proxy_start
	start_holder "$name" -u "$PROXY_URL" "$@"
	swallow ':released'
	touch "$name.release"
	rlock_wait "$HOLDER_PID" 30
	swallowed || fail "the release's reply was not swallowed: $(cat "$HOLDER_ERR")"
	if ((RLOCK_STATUS != 0)); then
		fail "exit $RLOCK_STATUS after a run that held its lock to the end: $(cat "$HOLDER_ERR")"
	fi
	run ! grep -q 'lost' "$HOLDER_ERR"
	wait_until 10 key_absent "rlock:{$name}" # --min-hold: once its keep ends
	# one run, ended once: released
	local h
	h=$(rlock -k "$name" --history --json)
	[[ $(grep -o '"event":"[a-z]*"' <<<"$h" | sort | tr '\n' ' ') == \
		'"event":"acquired" "event":"released" ' ]] || fail "history: $h"
	run -0 --separate-stderr rlock -k "$name" -n -- true
}

@test "a release whose reply is lost is sent again and ends 0, not 79 (exclusive)" {
	release_swallowed r
}

@test "a release whose reply is lost is sent again and ends 0 (-s, -l 2, --fair)" {
	release_swallowed rs -s
	release_swallowed rl -l 2
	release_swallowed rf --fair
}

@test "a release whose reply is lost ends 0 with the history off too (exclusive, -s)" {
	printf 'history = 0\n' >conf
	export RLOCK_CONFIG=$PWD/conf
	release_swallowed_nohist ro
	release_swallowed_nohist ros -s
}

@test "a release whose reply is lost ends 0 when the ACL refuses the history" {
	rcli ACL SETUSER nohist on '>pw' '~rlock:*' '&rlock:*' +@all -xadd -xrevrange >/dev/null
	export RLOCK_PASSWORD=pw
	release_swallowed_nohist ra --user nohist
	rcli ACL DELUSER nohist >/dev/null
}

@test "a release whose reply is lost ends 0 with a history above 1000 entries, more than 1000 written before it is sent again" {
	# released_before reads the last 1000 entries: other holders' records written
	# between the release and its retry hid its end record (79, "lost"); the mark answers
	printf 'history = 2000\n' >conf
	export RLOCK_CONFIG=$PWD/conf
	run -0 rlock -k warm -- true # the scripts are cached: EVALSHA runs as sent
	swallow_proxy_start
	start_holder rh -u "$PROXY_URL"
	# the retry comes late (800 ms each way): the records are written before it
	echo "swallow-slow :released" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow-slow :released" "$PROXY_MODE.seen"
	touch rh.release
	wait_until 20 swallowed
	local i
	for ((i = 0; i < 1001; i++)); do
		echo "XADD rlock:{rh}:history * ev acquired token other$i"
	done | rcli >/dev/null
	rlock_wait "$HOLDER_PID" 30
	((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS: $(cat "$HOLDER_ERR")"
	run ! grep -q 'lost' "$HOLDER_ERR"
	key_absent 'rlock:{rh}'
}

@test "a release with --min-hold whose reply is lost ends 0, kept once" {
	release_swallowed rm --min-hold 2s
}

# release_kept_swallowed NAME RLOCK-ARGS...: with the history off, a --min-hold run whose
# release's reply is lost, sent again once the keep has ended: 0, not 79.
release_kept_swallowed() {
	local name=$1
	shift
	run -0 rlock "$@" -k warm -- true # the scripts are cached: EVALSHA runs as sent
	rm -f "$BATS_TEST_TMPDIR"/proxymode*
	swallow_proxy_start
	# released 500 ms after the command started, the keep is 500 ms at most; once the
	# reply is swallowed the wire holds each way 800 ms: the release sent again reaches
	# the server after the keep has ended
	start_holder "$name" -v -u "$PROXY_URL" --io-timeout 5s --min-hold 1s "$@"
	echo "swallow-slow :released" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow-slow :released" "$PROXY_MODE.seen"
	wait_until 10 past $(($(cat "$BATS_TEST_TMPDIR/$name.start") + 500))
	touch "$name.release"
	rlock_wait "$HOLDER_PID" 30
	swallowed || fail "the release's reply was not swallowed: $(cat "$HOLDER_ERR")"
	((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS after a run that held its lock to the end: $(cat "$HOLDER_ERR")"
	run ! grep -q 'lost' "$HOLDER_ERR"
	# -v says what happened: kept, the keep over (not "keeps it", nor "handed on")
	grep -q "released rlock:{$name}; its --min-hold keep is over already" "$HOLDER_ERR" ||
		fail "-v: $(cat "$HOLDER_ERR")"
	if [[ -n ${RLOCK_CONFIG:-} ]]; then
		key_absent "rlock:{$name}:history"
	fi
	run -0 --separate-stderr rlock -k "$name" -n "$@" -- true
}

@test "a release with --min-hold whose reply is lost and that is sent again after the keep ended: 0, not 79, with the history off too (exclusive, -s)" {
	printf 'history = 0\n' >conf
	export RLOCK_CONFIG=$PWD/conf
	release_kept_swallowed rk
	release_kept_swallowed rks -s
}

@test "a release with --min-hold whose reply is lost and that is sent again after the keep ended, the history on: -v says the keep is over, not a hand-on (exclusive, -s)" {
	release_kept_swallowed rkh
	release_kept_swallowed rkhs -s
}

@test "--once-per: a release whose reply is lost and whose retry cannot reach the server: 0, and the line does not say the name is unmarked (the first release marked it)" {
	run -0 rlock -k warm -- true # the scripts are cached: EVALSHA runs as sent
	rm -f "$BATS_TEST_TMPDIR"/proxymode*
	swallow_proxy_start
	start_holder op -u "$PROXY_URL" --io-timeout 2s --once-per 1h
	# the reply is thrown away, the wire held 800 ms from then on: the retry then meets
	# a proxy that resets every connection
	echo "swallow-slow :released" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow-slow :released" "$PROXY_MODE.seen"
	touch op.release
	wait_until 10 swallowed
	echo reset >"$PROXY_MODE"
	rlock_wait "$HOLDER_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	key_absent 'rlock:{op}' # the first release did release it
	key_exists 'rlock:{op}:done' || fail "the first release wrote no mark"
	grep -q 'cannot release' "$HOLDER_ERR" || fail "the retry was not refused: $(cat "$HOLDER_ERR")"
	# not "not marked done: a later run runs again" as a fact: it is marked, the next skips
	grep -q 'unless the server got the release' "$HOLDER_ERR" || fail "$(cat "$HOLDER_ERR")"
	run -75 --separate-stderr rlock -k op -n --once-per 1h -- true
}

@test "--release of an --acquire keeper's lock whose reply is lost and whose retry cannot reach the server: 69, and the line does not say as a fact that the lock expires by its TTL (the server released it)" {
	export XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/rt
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	# the scripts are cached: EVALSHA runs as sent (status.lua too, read by --release)
	run -0 rlock -k warm -- true
	run -0 rlock -k warm --status
	rm -f "$BATS_TEST_TMPDIR"/proxymode*
	swallow_proxy_start
	run -0 --separate-stderr rlock -k kr --acquire -t 10s --log-file "$PWD/k.log"
	eval "$output"
	[[ -n ${RLOCK_TOKEN:-} ]] || fail "no token: $output"
	echo "swallow-slow :released" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow-slow :released" "$PROXY_MODE.seen"
	rlock_bg -u "$PROXY_URL" -k kr --release --io-timeout 2s
	local r_pid=$RLOCK_PID r_err=$RLOCK_ERR
	wait_until 10 swallowed
	echo reset >"$PROXY_MODE"
	rlock_wait "$r_pid" 30
	assert_equal "$RLOCK_STATUS" 69
	key_absent 'rlock:{kr}' # the first release did release it
	grep -q 'cannot release' "$r_err" || fail "the retry was not refused: $(cat "$r_err")"
	grep -q 'unless the server got the release (its reply lost), it expires by its TTL' "$r_err" ||
		fail "$(cat "$r_err")"
}

# release_trimmed NAME RLOCK-ARGS...: with a short history (history = 1), a run whose
# release's reply is lost, and is sent again late (the wire slow from then on), while a
# waiter the release woke takes the lock: the waiter's acquired record trims the
# release's own from the history before it is sent again. It still ends 0, not 79.
release_trimmed() {
	local name=$1
	shift
	printf 'history = 1\n' >conf
	export RLOCK_CONFIG=$PWD/conf
	run -0 rlock "$@" -k warm -- true # the scripts are cached: EVALSHA runs as sent
	rm -f "$BATS_TEST_TMPDIR"/proxymode*
	swallow_proxy_start
	# the wire holds each way 800 ms once the reply is swallowed: one round trip in time
	start_holder "$name" -u "$PROXY_URL" --io-timeout 5s "$@"
	rlock_bg -vv -w 60s -k "$name" -- touch "$name.w.ran"
	local w=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$werr"
	echo "swallow-slow :released" >"$PROXY_MODE"
	wait_until 10 grep -qsxF "swallow-slow :released" "$PROXY_MODE.seen"
	touch "$name.release"
	rlock_wait "$HOLDER_PID" 30
	local held=$RLOCK_STATUS
	swallowed || fail "the release's reply was not swallowed: $(cat "$HOLDER_ERR")"
	rlock_wait "$w" 30 || fail "the waiter: $(cat "$werr")"
	assert_equal "$RLOCK_STATUS" 0
	[[ -e $name.w.ran ]] || fail "$(cat "$werr")"
	((held == 0)) || fail "exit $held after a run that held its lock to the end: $(cat "$HOLDER_ERR")"
	run ! grep -q 'lost' "$HOLDER_ERR"
}

@test "a release whose reply is lost ends 0 when a short history (history = 1) lost its record meanwhile (exclusive, -s)" {
	release_trimmed rt
	release_trimmed rts -s
}



# release_sha NKEYS FIRSTKEY RLOCK-ARGS...: the SHA-1 of the release script rlock sends
# (release.lua: 2 keys, the lock first; release_sem.lua: 3, its holders first), read off
# MONITOR while a run of the name shaw releases.
release_sha() {
	local n=$1 first=$2 mon
	shift 2
	rcli MONITOR >mon.log &
	mon=$!
	track_pid "$mon"
	wait_until 10 grep -aq OK mon.log
	run -0 rlock "$@" -k shaw -- true
	wait_until 10 grep -aqF "\"$n\" \"rlock:{shaw}$first\"" mon.log
	kill "$mon"
	wait_until 10 proc_gone "$mon"
	grep -aoE "\"EVALSHA\" \"[0-9a-f]{40}\" \"$n\" \"rlock:\\{shaw\\}$first\"" mon.log |
		head -1 | cut -d'"' -f4
}

@test "a release told the lease was lost, sent again after its reply was lost, answers as the first did (released), with the default history of 100 too (exclusive, -s)" {
	# Its end record is 'lost', not 'released', and with a history of 100 entries or
	# more no :rel: mark is written: the release sent again found neither and answered
	# 0 (not ours), where the first answered 1. (Redlock sends a node's release again.)
	local sha tok mode keys
	for mode in x s; do
		local m=() first='' nk=2
		[[ $mode == s ]] && m=(-s) first=:holders nk=3
		sha=$(release_sha "$nk" "$first" "${m[@]}")
		[[ $sha =~ ^[0-9a-f]{40}$ ]] || fail "no release script seen"
		run -0 rlock "${m[@]}" -k "wl$mode" --acquire
		eval "$output"
		tok=$RLOCK_TOKEN
		local keeper
		if [[ $mode == x ]]; then
			keeper=$(rcli HGET "rlock:{wl$mode}:owner" pid)
			keys=("rlock:{wl$mode}" "rlock:{wl$mode}:owner")
		else
			keeper=$(rcli HGET "rlock:{wl$mode}:meta" "$tok" | jq -r .pid)
			keys=("rlock:{wl$mode}:holders" "rlock:{wl$mode}:meta" "rlock:{wl$mode}:limit")
		fi
		# the keeper gone unheard: its run is open, the lease still its own on the server
		kill -KILL "$keeper"
		wait_until 10 proc_gone "$keeper"
		local args=("$tok" 0 "rlock:{wl$mode}:released" PUBLISH "rlock:{wl$mode}:wake:" 0 0 100 604800000 lost)
		assert_equal "$(rcli EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" "${args[@]}")" 1
		assert_equal "$(rcli EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" "${args[@]}")" 1
		# one run, one end: lost
		local h
		h=$(rlock -k "wl$mode" --history --json)
		[[ $(grep -o '"event":"[a-z]*"' <<<"$h" | sort | tr '\n' ' ') == \
			'"event":"acquired" "event":"lost" ' ]] || fail "history: $h"
		unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
	done
}

# preempted_swallowed NAME: a --preemptible holder stopped for a --preempt request, whose
# release (handing the lock to the request) loses its reply: the release sent again
# answers as the first did (handed over), so the holder still exits 81, and the run ends
# preempted once.
preempted_swallowed() {
	local name=$1
	run -0 env -u RLOCK_PASSWORD "$RLOCK" -k warm -- true # the scripts are cached
	swallow_proxy_start
	start_holder "$name" -u "$PROXY_URL" -t 3s --preemptible
	swallow ':released'
	rlock_bg -w 60s -t 30s --preempt -k "$name" -- touch "$name.r.ran"
	local r=$RLOCK_PID r_err=$RLOCK_ERR
	rlock_wait "$HOLDER_PID" 30
	swallowed || fail "the release's reply was not swallowed: $(cat "$HOLDER_ERR")"
	((RLOCK_STATUS == 81)) || fail "exit $RLOCK_STATUS: $(cat "$HOLDER_ERR")"
	grep -q 'the lock is released to that request; exiting 81' "$HOLDER_ERR" ||
		fail "$(cat "$HOLDER_ERR")"
	rlock_wait "$r" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e $name.r.ran ]] || fail "$(cat "$r_err")"
}

@test "a preempted holder's release whose reply is lost is sent again: still 81, the run preempted once" {
	preempted_swallowed pr
	local h
	h=$(rlock -k pr --history --json)
	jq -e '[.entries[] | .event] | sort == ["acquired", "acquired", "preempted", "released"]' \
		<<<"$h" >/dev/null || fail "history: $h"
}

@test "a preempted holder's release whose reply is lost: still 81 with the history off too" {
	printf 'history = 0\n' >conf
	export RLOCK_CONFIG=$PWD/conf
	preempted_swallowed po
	key_absent 'rlock:{po}:history'
}

# release_swallowed_nohist NAME RLOCK-ARGS...: release_swallowed, no history written (off,
# or refused): the first release leaves its mark (rlock:{NAME}:rel:TOKEN) for what was
# left of the lease.
release_swallowed_nohist() {
	local name=$1
	shift
	# the scripts are cached (EVALSHA runs as sent), by the default user
	run -0 env -u RLOCK_PASSWORD "$RLOCK" -k warm -- true
	swallow_proxy_start
	start_holder "$name" -u "$PROXY_URL" "$@"
	swallow ':released'
	touch "$name.release"
	rlock_wait "$HOLDER_PID" 30
	swallowed || fail "the release's reply was not swallowed: $(cat "$HOLDER_ERR")"
	((RLOCK_STATUS == 0)) || fail "exit $RLOCK_STATUS: $(cat "$HOLDER_ERR")"
	key_absent "rlock:{$name}:history"
	key_exists "rlock:{$name}:rel:$(env_of "$name" RLOCK_TOKEN)" || fail "no mark: $(cat "$HOLDER_ERR")"
	key_absent "rlock:{$name}"
}

# acquire_swallowed NAME RLOCK-ARGS...: a waiter's attempt takes the lock as the holder
# releases it, and its reply is lost; the attempt sent again at once on a fresh
# connection takes the lock as its own, the fence counted once (RLOCK_FENCE, the
# counter and the history's records agree).
acquire_swallowed() {
	local name=$1
	shift
	run -0 rlock -k warm -- true
	swallow_proxy_start
	start_holder "$name" # directly, not through the proxy
	local first=$HOLDER_PID
	rlock_bg -vv -u "$PROXY_URL" -w 60s "$@" -k "$name" -- "$HOLD" "$name-w"
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$werr"
	swallow ":{$name}:fence"
	touch "$name.release"
	rlock_wait "$first" 30
	wait_until 30 test -e "$name-w.started" || fail "the waiter never ran: $(cat "$werr")"
	track_pidfile "$name-w.pid"
	swallowed || fail "the acquire's reply was not swallowed: $(cat "$werr")"
	assert_equal "$(fence_of "$name")" 2
	assert_equal "$(env_of "$name-w" RLOCK_FENCE)" 2
	touch "$name-w.release"
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	# two runs in the history, fences 1 and 2, each acquired once
	local h
	h=$(rlock -k "$name" --history --json)
	[[ $(grep -o '"event":"acquired"' <<<"$h" | wc -l) == 2 ]] || fail "history: $h"
	[[ $(grep -o '"fence":[0-9]*' <<<"$h" | sort -u | tr '\n' ' ') == '"fence":1 "fence":2 ' ]] ||
		fail "history: $h"
}

@test "-n, an acquire whose reply is lost with its connection: 69, and the lock it took is given back" {
	run -0 rlock -k warm -- true
	swallow_proxy_start
	swallow ':{g}:fence'
	run -69 --separate-stderr rlock -u "$PROXY_URL" -n -k g -- touch ran
	swallowed || fail "the acquire's reply was not swallowed: $stderr"
	[[ $stderr != *TLS* ]] || fail "a plaintext Redis called a TLS port: $stderr"
	[[ ! -e ran ]]
	assert_equal "$(fence_of g)" 1 # the server ran it
	key_absent 'rlock:{g}' || fail "the lock was left held for its ttl: $(rcli PTTL 'rlock:{g}') ms"
}

@test "the first request of a run whose reply is lost with its connection (a proxy that died): no 'TLS port?' (the port does not answer TLS), -w rides it out and takes its own lock (one fence); was 69 at once" {
	run -0 rlock -k warm -- true # the scripts are cached: the acquire is the first request
	swallow_proxy_start
	swallow ':{p}:fence'
	run --separate-stderr timeout -k 5 30 "$RLOCK" -u "$PROXY_URL" --io-timeout 5s -w 20s \
		-k p -t 30s -- touch ran
	swallowed || fail "the acquire's reply was not swallowed: $stderr"
	((status == 0)) || fail "exit $status: $stderr"
	[[ -e ran ]]
	[[ $stderr != *TLS* ]] || fail "a plaintext Redis called a TLS port: $stderr"
	assert_regex "$stderr" 'retrying for up to'
	assert_equal "$(fence_of p)" 1 # its own grant recognised by the token, not a second one
	key_absent 'rlock:{p}'
}

@test "a database past the server's (/99, its databases 16): 64, one line naming it, not 69; --check's verdict bad-url" {
	run -64 --separate-stderr timeout -k 5 20 "$RLOCK" -u "redis://127.0.0.1:$REDIS_PORT/99" \
		-w 20s -k d -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: database 99 in the URL: 127.0.0.1:$REDIS_PORT has no such database"
	[[ ! -e ran ]]
	run -64 --separate-stderr timeout -k 5 20 "$RLOCK" -u "redis://127.0.0.1:$REDIS_PORT/99" --check
	assert_output --partial 'verdict: bad-url'
}

@test "an acquire whose reply is lost is sent again: one fence (exclusive)" {
	acquire_swallowed a
}

@test "an acquire whose reply is lost is sent again: one fence (-s, -l 2, --fair)" {
	acquire_swallowed as -s
	acquire_swallowed al -l 2
	acquire_swallowed af --fair
}

@test "several locks: the second one's acquire whose reply is lost is sent again within -w (one fence each, the command runs; was 69); with -n, 69 and both given back" {
	run -0 rlock -k warm -- true
	swallow_proxy_start
	local m first second
	for m in "a b" "c d -l 2"; do
		# shellcheck disable=SC2086
		set -- $m
		first=$1 second=$2
		shift 2
		swallow ":{$second}:fence"
		# shellcheck disable=SC2016 # the command expands it
		run --separate-stderr rlock -u "$PROXY_URL" "$@" -w 20s -k "$first" -k "$second" -- \
			sh -c 'echo "$RLOCK_FENCES" >fences'
		swallowed || fail "the acquire's reply was not swallowed: $stderr"
		rm "$PROXY_MODE.swallowed"
		((status == 0)) || fail "$*: exit $status: $stderr"
		assert_equal "$(cat fences)" '1 1'
		key_absent "rlock:{$first}"
		key_absent "rlock:{$second}"
		key_absent "rlock:{$second}:holders"
	done
	swallow ':{f}:fence'
	run -69 --separate-stderr rlock -u "$PROXY_URL" -n -k e -k f -- touch ran
	swallowed || fail "the acquire's reply was not swallowed: $stderr"
	[[ ! -e ran ]]
	assert_equal "$(fence_of f)" 1 # the server ran it
	key_absent 'rlock:{e}' || fail "e was left held"
	key_absent 'rlock:{f}' || fail "f was left held for its ttl: $(rcli PTTL 'rlock:{f}') ms"
}

# --- Decisions bound to the request they were made for, and to its being alive -----

@test "--supersede: a replaced request whose next attempt finds the lock free exits 80, never runs" {
	start_holder s -t 30s
	local first=$HOLDER_PID
	rlock_bg -vv --supersede -w 60s -k s -- touch a.ran
	local a=$RLOCK_PID a_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$a_err"
	kill -STOP "$a" # away (stopped, an outage): it tries again only after all of this
	rlock_bg -vv --supersede -w 60s -k s -- touch b.ran
	local b=$RLOCK_PID b_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$b_err"
	touch s.release
	rlock_wait "$first" 30
	rlock_wait "$b" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e b.ran ]]
	key_absent 'rlock:{s}' # the newer one ran and released: the lock is free
	kill -CONT "$a"
	rlock_wait "$a" 30
	[[ ! -e a.ran ]] || fail "the replaced request ran after the newer one: $(cat "$a_err")"
	assert_equal "$RLOCK_STATUS" 80
	grep -q 'superseded by a newer --supersede request' "$a_err" || fail "$(cat "$a_err")"
}

@test "--preempt: the preempted holder's release hands the lock to the request that asked, not the next waiter" {
	start_holder p -t 3s --preemptible
	local first=$HOLDER_PID
	# an ordinary waiter: the next one a plain release wakes (its place, a lease of its
	# short ttl, ends first)
	rlock_bg -vv -w 60s -t 3s -k p -- "$HOLD" w
	local w=$RLOCK_PID w_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$w_err"
	rlock_bg -w 60s -t 30s --preempt -k p -- "$HOLD" u
	local u=$RLOCK_PID u_err=$RLOCK_ERR
	rlock_wait "$first" 30
	assert_equal "$RLOCK_STATUS" 81
	wait_until 30 test -e u.started -o -e w.started
	track_pidfile u.pid || :
	track_pidfile w.pid || : # not started yet, or the holder it must not be
	[[ -e u.started && ! -e w.started ]] ||
		fail "the lock went to the ordinary waiter: $(cat "$w_err") / $(cat "$u_err")"
	touch u.release w.release
	rlock_wait "$u" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$w" 30
	assert_equal "$RLOCK_STATUS" 0
	# no request left: at most the grant's 'taken' word for the preempted holder
	assert_equal "$(rcli HMGET 'rlock:{p}:preempt' token handover | tr -d '\n')" ""
}

@test "--preempt: a requester killed hard (SIGKILL) no longer stops the holder" {
	# renewals every 10 s: the first comes after the dead requester's mark is gone
	start_holder k -t 30s --preemptible
	local first=$HOLDER_PID t0
	t0=$(now_ms)
	rlock_bg -vv -w 60s --preempt -k k -- true
	local u=$RLOCK_PID u_err=$RLOCK_ERR
	wait_until 30 grep -q 'listening for the release' "$u_err"
	key_exists 'rlock:{k}:preempt'
	kill -KILL "$u"
	# gone within its short lease, not the requester's ttl (30 s)
	wait_until 15 key_absent 'rlock:{k}:preempt' ||
		fail "the mark outlives its requester: $(rcli PTTL 'rlock:{k}:preempt') ms"
	# past the holder's first renewal (at 10 s): still running
	wait_until 30 past $((t0 + 11000))
	proc_alive "$first" || fail "the holder was stopped for a request that is gone: $(cat "$HOLDER_ERR")"
	[[ ! -e k.end ]]
	touch k.release
	rlock_wait "$first" 30
	assert_equal "$RLOCK_STATUS" 0
}

# proxied_sentinel_start: one sentinel that names the test server through the swallowing
# proxy as the master 'm' (swallow_proxy_start): a routed request (Sentinel's route,
# which goes elsewhere when a server fails) passes the proxy. Sets SENT_URL.
proxied_sentinel_start() {
	swallow_proxy_start || return 1
	local pport=${PROXY_URL##*:} sport dir=$BATS_TEST_TMPDIR/sentinel
	sport=$(free_port) || return 1
	mkdir -p "$dir"
	printf '%s\n' "port $sport" 'bind 127.0.0.1' 'daemonize no' "dir $dir" \
		'sentinel resolve-hostnames no' "sentinel monitor m 127.0.0.1 $pport 1" >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/log" 2>&1 3>&- 4>&- &
	track_pid $!
	disown $!
	wait_until 30 sh -c "redis-cli -p $sport SENTINEL get-master-addr-by-name m 2>/dev/null | grep -qx $pport" ||
		return 1
	SENT_URL=redis-sentinel://127.0.0.1:$sport/m
}

# A --break is never sent twice: its script cannot tell its own earlier effect from a
# holder it never saw (the waiter its break woke). Through a route that follows a server
# that fails (Sentinel), a break whose reply is lost was sent again: with --token, "no
# such holder" (79) for the holder it had broken; without, it broke the next holder too.
@test "a --break whose reply is lost is not sent again elsewhere (Sentinel): not 79, and the next holder is not broken" {
	proxied_sentinel_start
	run -0 rlock -k warm --break # the scripts are cached: EVALSHA runs as sent
	local opt
	for opt in "" --token; do
		rm -f "$BATS_TEST_TMPDIR"/proxymode.* b.* bw.*
		echo pass >"$PROXY_MODE"
		start_holder b -t 30s
		local first=$HOLDER_PID token
		token=$(env_of b RLOCK_TOKEN)
		rlock_bg -vv -w 60s -t 30s -k b -- "$HOLD" bw
		local w=$RLOCK_PID werr=$RLOCK_ERR
		wait_until 30 grep -q 'listening for the release' "$werr"
		echo "swallow-slow :wake:" >"$PROXY_MODE"
		wait_until 10 grep -qsxF "swallow-slow :wake:" "$PROXY_MODE.seen"
		# shellcheck disable=SC2086  # no --token: no word
		run --separate-stderr rlock -u "$SENT_URL" --io-timeout 5s -k b --break ${opt:+--token "$token"}
		swallowed || fail "the break's reply was not swallowed: $stderr"
		((status != 79)) || fail "79 (no such holder) for the holder it broke: $stderr"
		((status == 69)) || fail "exit $status: $stderr"
		rlock_wait "$first" 30
		assert_equal "$RLOCK_STATUS" 79 # broken once: its own loss
		# the waiter the break woke holds the lock, unbroken
		wait_until 30 test -e bw.started || fail "the waiter never ran: $(cat "$werr")"
		track_pidfile bw.pid
		[[ $(rcli GET 'rlock:{b}') == "$(env_of bw RLOCK_TOKEN)" ]] ||
			fail "the waiter's lock was broken too: $stderr"
		touch bw.release
		rlock_wait "$w" 30
		assert_equal "$RLOCK_STATUS" 0
	done
}

@test "a slow link (replies dripped): -v's look at the eviction policy at start does not hold up the first renewal; held to the end, 0 with and without -v" {
	# -v looks at the policy (INFO memory, about 1 KB: seconds at 10 ms a byte) as soon
	# as the lock is taken, on the renewal's connection. It may take until the first
	# renewal is due, not until the lease can no longer be trusted: else the renewal
	# (4 bytes: 40 ms) waits behind it and the lock is lost (79) where a run without -v
	# keeps it.
	local v
	run rlock --check # loads every script: no NOSCRIPT (dripped too) before a renewal
	[[ $output == *'scripts of rlock load'* ]] || fail "scripts not loaded: $output"
	swallow_proxy_start
	echo dripreply >"$PROXY_MODE"
	wait_until 10 grep -qsx dripreply "$PROXY_MODE.seen"
	for v in "" -v; do
		run --separate-stderr rlock $v -u "$PROXY_URL" -t 1500ms -k "drip$v" -- sleep 2.5
		((status == 0)) || fail "rlock $v: exit $status: $stderr"
	done
}

