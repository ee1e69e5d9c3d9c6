#!/usr/bin/env bats
# shellcheck disable=SC2154  # bats sets $stderr
# Holders and waiters that can be judged (issue 27, part B): the holder's last renewal
# (the server's clock) and, on this host, whether its process still runs; fair waiters'
# host, pid and age, and their short place lease (a dead waiter costs seconds, not a
# ttl); compare-and-break (--break --token / --if-fence) and the record of who broke;
# the progress line of a waiting run without a terminal.

load helpers

# status_json NAME FILTER: a jq filter applied to --status --json of NAME.
status_json() {
	"$RLOCK" -k "$1" --status --json 2>/dev/null | jq -r "$2"
}

# held_longer_than NAME MS: the holder has held NAME for more than MS.
held_longer_than() {
	local h
	h=$(status_json "$1" .held_ms)
	[[ $h =~ ^[0-9]+$ ]] && ((h > $2))
}

# queue_counts NAME N: --status counts N live places in NAME's fair queue.
queue_counts() { [[ $(status_json "$1" ".queue_length // 0") == "$2" ]]; }

# renewed_ago_at_least NAME MS: the holder's last renewal is at least MS old.
renewed_ago_at_least() {
	local a
	a=$(status_json "$1" .renewed_ago_ms)
	[[ $a =~ ^[0-9]+$ ]] && ((a >= $2))
}

queue_length() { [[ $(rcli ZCARD "rlock:{$1}:queue") == "$2" ]]; }

# ---------------------------------------------------------------------------------
# a holder that can be judged

@test "a SIGKILLed holder on this host is shown as gone (--status, --json, --list)" {
	start_holder g -t 60s
	run -75 rlock -k g --status
	assert_line --regexp "^ +process +$HOLDER_PID runs on this host\$"
	assert_line --regexp '^ +renewed +[0-9.ms]+ ago$'
	assert_equal "$(status_json g .pid_alive)" true
	kill -KILL "$HOLDER_PID"
	wait_until 30 proc_gone "$HOLDER_PID"
	wait_until 30 pidfile_gone g.pid
	run -75 rlock -k g --status
	assert_line --regexp "^ +process +holder process $HOLDER_PID is gone from this host; the lease ends in [0-9]"
	run -75 --separate-stderr rlock -k g --status --json
	assert_equal "$(jq -r .pid_alive <<<"$output")" false
	assert_equal "$(jq -r .pid <<<"$output")" "$HOLDER_PID"
	run -0 rlock --list
	assert_regex "${lines[0]}" '^NAME +HOST +PID +HELD +TTL +RENEWED +COMMAND$'
	assert_regex "${lines[1]}" "^g +$(hostname) +$HOLDER_PID .*\[gone\] $HOLD g\$"
}

@test "the last renewal's age: small while renewed, growing once the holder is gone" {
	start_holder r -t 3s
	# a live holder renews every second: its last renewal is never near the 3 s ttl,
	# while it has held longer than that
	wait_until 30 held_longer_than r 4000
	local a
	a=$(status_json r .renewed_ago_ms)
	[[ $a =~ ^[0-9]+$ ]] && ((a < 3000)) || fail "renewed_ago_ms $a while renewed every second"
	touch r.release
	rlock_wait "$HOLDER_PID"
	assert_equal "$RLOCK_STATUS" 0
	# a dead holder's age grows (by the server's clock) until its lease ends
	start_holder d -t 60s
	kill -KILL "$HOLDER_PID"
	wait_until 30 proc_gone "$HOLDER_PID"
	a=$(status_json d .renewed_ago_ms)
	[[ $a =~ ^[0-9]+$ ]] || fail "renewed_ago_ms: '$a'"
	wait_until 30 renewed_ago_at_least d $((a + 1500))
	run -75 rlock -k d --status
	assert_line --regexp '^ +renewed +[0-9.]+s ago$'
}

# ---------------------------------------------------------------------------------
# compare-and-break

@test "--break --token of a holder that was replaced does nothing, says so, exits 79" {
	start_holder a -t 60s --on-lost ignore
	local first=$HOLDER_PID second old_token old_fence
	old_token=$(env_of a RLOCK_TOKEN)
	old_fence=$(env_of a RLOCK_FENCE)
	run -0 rlock -k a --break
	# the next holder takes it between the operator's look and the break
	rlock_bg -t 60s -k a -- "$HOLD" b
	second=$RLOCK_PID
	wait_until 30 test -e b.started
	local new_token
	new_token=$(env_of b RLOCK_TOKEN)
	run -79 --separate-stderr rlock -k a --break --token "$old_token"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "not broken: rlock:\{a\} is not held by token $old_token; it is held by $(hostname) pid $second, token $new_token"
	run -79 rlock -k a --break --if-fence "$old_fence"
	run -79 rlock -k a --break --token "$new_token" --if-fence "$old_fence"
	assert_equal "$(rcli GET 'rlock:{a}')" "$new_token"
	assert_equal "$(status_json a .pid)" "$second"
	# the holder that is there is broken by its own token
	run -0 --separate-stderr rlock -k a --break --token "$new_token" --if-fence "$(env_of b RLOCK_FENCE)"
	assert_regex "$stderr" "broke rlock:\{a\}: token $new_token"
	key_absent 'rlock:{a}'
	# a free lock: nothing to compare with
	run -79 --separate-stderr rlock -k a --break --token "$new_token"
	assert_regex "$stderr" 'not broken: .* it is free'
	touch a.release b.release
	rlock_wait "$first"
	rlock_wait "$second"
}

@test "--break --token / --if-fence refused on a name kept closed or reserved: says so, not 'free'" {
	# closed by a lock-delay: the holder died with its lease
	rlock_bg -t 1s --lock-delay 60s -k c -- "$HOLD" c
	wait_until 30 test -e c.started
	local token fence
	token=$(env_of c RLOCK_TOKEN)
	fence=$(env_of c RLOCK_FENCE)
	kill -KILL "$RLOCK_PID"
	wait_until 30 not key_exists 'rlock:{c}'
	run -79 --separate-stderr rlock -k c --break --token "$token"
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "not broken: rlock:\{c\} is not held by token $token; it is closed by lock-delay until .* left\) \(nothing removed\)"
	run -79 --separate-stderr rlock -k c --break --if-fence "$fence"
	assert_regex "$stderr" 'it is closed by lock-delay until'
	assert_equal "$(rcli EXISTS 'rlock:{c}:delay')" 1
	touch c.release
	# reserved for a --preempt request (its preempted holder released it to that request);
	# its label, a tab in it, escaped once (as --status and a busy request say it)
	rcli HSET 'rlock:{r}:preempt' handover 1 token 0123456789abcdef0123456789abcdef \
		host h1 pid 77 label "$(printf 'ci\tjob')" >/dev/null
	rcli PEXPIRE 'rlock:{r}:preempt' 60000 >/dev/null
	run -79 --separate-stderr rlock -k r --break --token 0123456789abcdef0123456789abcdef
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" 'it is reserved for the --preempt request of h1 pid 77 \[ci\\x09job\] until .* \(nothing removed\)'
	run -0 --separate-stderr rlock -k r --reset
	assert_regex "$stderr" 'is still reserved for the --preempt request of h1 pid 77 \[ci\\x09job\] until .*: --break removes it'
	run -75 --separate-stderr rlock -k r -n -- true
	assert_regex "$stderr" 'reserved for the --preempt request of h1 pid 77 \[ci\\x09job\] for'
	assert_equal "$(rcli HGET 'rlock:{r}:preempt' handover)" 1
}

@test "--break --token / --if-fence: bad input is a usage error" {
	run -64 --separate-stderr rlock -k a --break --token nothex
	assert_regex "$stderr" 'not an rlock token'
	run -64 --separate-stderr rlock -k a --break --if-fence 1x
	assert_regex "$stderr" 'not a fence'
	run -64 --separate-stderr rlock -k a --if-fence 1 -- true
	assert_regex "$stderr" '--if-fence goes with --break'
}

@test "who broke the lock: kept for an hour, shown by --status and in the holder's loss message" {
	start_holder k -t 3s --kill-after 1s
	local token
	token=$(env_of k RLOCK_TOKEN)
	run -0 rlock -k k --break --token "$token"
	rlock_wait "$HOLDER_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_regex "$(cat "$HOLDER_ERR")" "the lock is no longer ours: broken [0-9.ms]+ ago by --break from $(hostname) pid [0-9]+ \(user $(id -un)\)"
	run -0 rlock -k k --status
	assert_line --regexp "^broken +[0-9.ms]+ ago \(.*\) by $(hostname) pid [0-9]+ \(user $(id -un)\): token ${token:0:16}\.\.\., fence $(env_of k RLOCK_FENCE)\$"
	run -0 --separate-stderr rlock -k k --status --json
	assert_equal "$(jq -r '.broken.host, .broken.user, .broken.tokens[0], .broken.fence' <<<"$output" | tr '\n' ' ')" \
		"$(hostname) $(id -un) $token $(env_of k RLOCK_FENCE) "
	jq -e '(.broken.pid|type)=="number" and .broken.ago_ms >= 0' <<<"$output" >/dev/null
	local pttl
	pttl=$(rcli PTTL 'rlock:{k}:broken')
	((pttl > 3000000 && pttl <= 3600000)) || fail "PTTL of the record: $pttl"
}

@test "who broke the lock, named when the command had already ended (the release finds it gone): 79, host, pid, user, label, when" {
	# A 60 s lease: no renewal runs before the command ends, so the release is the first
	# to find the lock gone.
	start_holder k -t 60s
	run -0 rlock -k k --break --label 'stuck deploy'
	touch k.release
	rlock_wait "$HOLDER_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	assert_regex "$(cat "$HOLDER_ERR")" "lock lost: it was no longer held when the command ended: broken [0-9.ms]+ ago by --break from $(hostname) pid [0-9]+ \(user $(id -un)\) \[stuck deploy\]"
	# --status shows the breaker's label too
	run -0 rlock -k k --status
	assert_line --regexp "^broken +[0-9.ms]+ ago \(.*\) by $(hostname) pid [0-9]+ \(user $(id -un)\) \[stuck deploy\]: token "
	run -0 --separate-stderr rlock -k k --status --json
	assert_equal "$(jq -r .broken.label <<<"$output")" 'stuck deploy'
}

@test "who broke a keeper's lock, named by --release and by the keeper released on a signal: 79" {
	eval "$("$RLOCK" -k kp -t 60s --acquire --log-file "$PWD/k.log")"
	local keeper
	keeper=$(rcli HGET 'rlock:{kp}:owner' pid)
	track_pid "$keeper"
	run -0 rlock -k kp --break --label 'operator'
	run -79 --separate-stderr rlock -k kp --release
	assert_regex "$stderr" "lock 'kp' is not held by this token: broken [0-9.ms]+ ago by --break from $(hostname) pid [0-9]+ \(user $(id -un)\) \[operator\]"
	# the keeper, not stopped by a --release that found nothing to release, is told to
	# release (SIGTERM) before its renewal (at 20 s) notices
	kill -TERM "$keeper"
	wait_until 20 proc_gone "$keeper"
	assert_regex "$(cat k.log)" "lock lost: rlock:\{kp\} was no longer held when the keeper released it: broken [0-9.ms]+ ago by --break from $(hostname) pid [0-9]+ \(user $(id -un)\) \[operator\]"
}

# ---------------------------------------------------------------------------------
# the fair queue

@test "fair waiters show host, pid and how long they wait" {
	start_holder q --fair -t 60s
	rlock_bg --fair -t 60s -k q -- true
	local w=$RLOCK_PID
	wait_until 30 queue_length q 1
	run -75 rlock -k q --status
	assert_line --regexp "^ +#1 +$(hostname) pid $w, waiting [0-9.ms]+ \(token [0-9a-f]{8}\.\.\., place lease left [0-9.]+s\)\$"
	run -75 --separate-stderr rlock -k q --status --json
	assert_equal "$(jq -r '.queue[0].host, .queue[0].pid' <<<"$output" | tr '\n' ' ')" "$(hostname) $w "
	jq -e '.queue[0].waited_ms >= 0 and .queue[0].lease_left_ms <= 5000' <<<"$output" >/dev/null
	touch q.release
	rlock_wait "$w" 30
	assert_equal "$RLOCK_STATUS" 0
}

@test "a SIGKILLed fair waiter delays the next by seconds, not its ttl" {
	start_holder f --fair -t 60s
	rlock_bg --fair -t 60s -k f -- touch first
	local dead=$RLOCK_PID
	wait_until 30 queue_length f 1
	rlock_bg --fair -t 60s -k f -- touch second
	local next=$RLOCK_PID
	wait_until 30 queue_length f 2
	kill -KILL "$dead"
	wait_until 30 proc_gone "$dead"
	local t0
	t0=$(now_ms)
	touch f.release
	rlock_wait "$HOLDER_PID" 30
	# the lock is free and the dead waiter's place is first: its place lease (5 s)
	# ends, not its 60 s ttl
	rlock_wait "$next" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e second && ! -e first ]]
	local took=$(($(now_ms) - t0))
	echo "# release → next fair waiter past a dead one: ${took} ms (its ttl 60 s)" >&3
}

@test "--break drops the queue places of fair waiters that are gone" {
	start_holder c --fair -t 60s --on-lost ignore
	rlock_bg --fair -t 60s -k c -- true
	local dead=$RLOCK_PID
	wait_until 30 queue_length c 1
	kill -KILL "$dead"
	wait_until 30 proc_gone "$dead"
	# its place lease (5 s) ends: --status counts it no more
	wait_until 30 queue_counts c 0
	run -0 --separate-stderr rlock -k c --break
	assert_regex "$stderr" 'dropped 1 queue place of waiters that are gone'
	queue_length c 0
	touch c.release
	rlock_wait "$HOLDER_PID"
}

# ---------------------------------------------------------------------------------
# waiting without a terminal

@test "a waiting run without a terminal prints a progress line (not under -q)" {
	start_holder p -t 60s --label deploy-42
	rlock_bg -w 60s --label mine -k p -- true
	local w=$RLOCK_PID werr=$RLOCK_ERR
	rlock_bg -q -w 60s -k p -- true
	local quiet=$RLOCK_PID qerr=$RLOCK_ERR
	# the first line comes after 10 s of waiting
	wait_until 40 grep -q 'still waiting' "$werr"
	assert_regex "$(cat "$werr")" "rlock: still waiting for 'p' \[mine\] after [0-9]+s: held by $(hostname) pid $HOLDER_PID \($HOLD p\) \[deploy-42\] for "
	touch p.release
	rlock_wait "$w" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$quiet" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $qerr ]] || fail "-q printed: $(cat "$qerr")"
}

@test "the token that --break --token compares is the one --status and --list --json show (issue 38)" {
	rlock_bg -k tok -- "$HOLD" tok
	local holder=$RLOCK_PID token
	wait_until 10 test -e tok.started
	token=$(rcli GET 'rlock:{tok}')
	run -75 rlock -k tok --status
	assert_line "  token    $token"
	run -0 rlock --list --json
	assert_output --partial "\"token\":\"$token\""
	run -75 rlock -k tok --status --json
	token=$(jq -r .token <<<"$output")
	run -0 --separate-stderr rlock -k tok --break --token "$token"
	assert_regex "$stderr" "^rlock: broke rlock:\{tok\}: token $token, "
	rlock_wait "$holder" 20
	assert_equal "$RLOCK_STATUS" 79
}
