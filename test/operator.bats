#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Operator features (SPEC §2, §4, §5): --status [--json], --break, --list [--json],
# --min-hold, re-entrancy of a nested rlock, the live waiting line on a terminal, and
# the warning about a server whose maxmemory-policy can evict the lock.

load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	# servers whose maxmemory-policy can evict keys (coordinates saved), then the main one
	redis_start --maxmemory-policy allkeys-lru
	export LRU_URL=$REDIS_URL LRU_PORT=$REDIS_PORT
	redis_start --maxmemory-policy volatile-lru
	export VLRU_URL=$REDIS_URL
	redis_start
}

has_waiter() { [[ $(waiters "$1") -ge 1 ]]; }

# ---------------------------------------------------------------------------------
# --status

@test "--status on a free lock: exit 0, 'is free (last fence N)'" {
	run -0 rlock -k s --status
	assert_output 'rlock:{s} is free (last fence 0)'
	run -0 rlock -k s -- true
	run -0 rlock -k s -- true
	run -0 rlock -k s --status
	assert_output 'rlock:{s} is free (last fence 2)'
}

@test "--status on a held lock: conflict status, holder details" {
	start_holder s -t 10s
	run -75 rlock -k s --status
	assert_line --index 0 'rlock:{s} is held'
	assert_line --regexp "^ +host +$(hostname)\$"
	assert_line --regexp "^ +pid +$HOLDER_PID\$"
	assert_line --regexp "^ +user +$(id -un)\$"
	assert_line --regexp "^ +command +$HOLD s\$"
	assert_line --regexp '^ +since +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} '
	assert_line --regexp '^ +ttl left +[0-9]'
	assert_line --regexp "^ +fence +$(env_of s RLOCK_FENCE)\$"
	# -E changes the status, as for a busy lock
	run -3 rlock -E 3 -k s --status
	# ... but a held lock never reads as free: -E 0 leaves it 75
	run -75 rlock -E 0 -k s --status
	touch s.release
	rlock_wait "$HOLDER_PID"
	assert_equal "$RLOCK_STATUS" 0
	run -0 rlock -k s --status
	assert_output 'rlock:{s} is free (last fence 1)'
}

@test "--status --json on a free lock: one object, parsed by jq" {
	run -0 --separate-stderr rlock -k s --status --json
	assert_equal "${#lines[@]}" 1
	jq -e . <<<"$output" >/dev/null
	assert_equal "$(jq -c 'keys' <<<"$output")" '["fence","held","key","name","schema"]'
	assert_equal "$(jq -r '.name, .key, .held, .fence' <<<"$output" | tr '\n' ' ')" 's rlock:{s} false 0 '
}

@test "--status --json on a held lock: holder fields with the right types and values" {
	start_holder s -t 10s
	local t0
	t0=$(cat s.start)
	run -75 --separate-stderr rlock -k s --status --json
	assert_equal "${#lines[@]}" 1
	local j=$output
	jq -e . <<<"$j" >/dev/null
	assert_equal "$(jq -r .name <<<"$j")" s
	assert_equal "$(jq -r .key <<<"$j")" 'rlock:{s}'
	assert_equal "$(jq -r .held <<<"$j")" true
	assert_equal "$(jq -r .host <<<"$j")" "$(hostname)"
	assert_equal "$(jq -r .pid <<<"$j")" "$HOLDER_PID"
	assert_equal "$(jq -r .user <<<"$j")" "$(id -un)"
	assert_equal "$(jq -r .command <<<"$j")" "$HOLD s"
	assert_equal "$(jq -r .ttl_ms <<<"$j")" 10000
	assert_equal "$(jq -r .fence <<<"$j")" "$(env_of s RLOCK_FENCE)"
	# numbers are numbers, and plausible
	jq -e '(.pid|type)=="number" and (.start_ms|type)=="number" and (.held_ms|type)=="number"
		and (.ttl_left_ms|type)=="number" and (.fence|type)=="number"' <<<"$j" >/dev/null
	jq -e '.ttl_left_ms > 0 and .ttl_left_ms <= .ttl_ms and .held_ms >= 0 and .held_ms < 10000' <<<"$j" >/dev/null
	# start_ms is the wall-clock start (the command started a little after it)
	local start
	start=$(jq -r .start_ms <<<"$j")
	((start <= t0 && t0 - start < 5000)) || fail "start_ms $start vs command start $t0"
	touch s.release
	rlock_wait "$HOLDER_PID"
}

@test "--status, --list: a holder whose clock runs ahead of the reader's: its held time is unknown (null, '-'), never negative" {
	start_holder s -t 10s
	# the holder's host stamps its start by its own wall clock, 2 minutes ahead of ours
	rcli HSET 'rlock:{s}:owner' start $(($(now_ms) + 120000)) >/dev/null
	run -75 --separate-stderr rlock -k s --status --json
	assert_equal "$(jq -c '.held_ms' <<<"$output")" null
	run -0 --separate-stderr rlock --list --json
	assert_equal "$(jq -c '[.locks[].held_ms]' <<<"$output")" '[null]'
	run -0 --separate-stderr rlock --list
	assert_line --index 1 --regexp '^s +[^ ]+ +[0-9]+ +- '
	touch s.release
	rlock_wait "$HOLDER_PID"
}

@test "--status --json escapes odd names and commands" {
	# a --status from inside the command sees its own holder: held, 75
	run -75 --separate-stderr rlock -k 'we"ird\x' -- "$RLOCK" -k 'we"ird\x' --status --json
	assert_equal "$(jq -r .name <<<"$output")" 'we"ird\x'
	assert_equal "$(jq -r .key <<<"$output")" 'rlock:{we"ird\x}'
	assert_equal "$(jq -r .command <<<"$output")" "$RLOCK -k we\"ird\\x --status --json"
}

@test "--status on a lock held by a plain SET (no metadata): held, exit 75, valid JSON" {
	rcli SET 'rlock:{f}' foreign-token PX 30000 >/dev/null
	run -75 rlock -k f --status
	assert_line --index 0 'rlock:{f} is held'
	run -75 rlock -k f --status --json
	assert_equal "$(jq -r .held <<<"$output")" true
}

@test "--status honours --prefix" {
	start_holder s --prefix other: -t 10s
	run -0 rlock -k s --status
	run -75 rlock --prefix other: -k s --status
	assert_line --index 0 'other:{s} is held'
	touch s.release
	rlock_wait "$HOLDER_PID"
}

@test "--status, --break and --list run no command" {
	run -64 rlock -k s --status -- touch ran
	run -64 rlock -k s --break -- touch ran
	run -64 rlock --list -- touch ran
	run -64 rlock --status
	run -64 rlock --break
	run -64 rlock -k s --json -- true
	[[ ! -e ran ]]
}

# ---------------------------------------------------------------------------------
# --break

@test "--break: removes lock and owner, keeps the fence, says what it removed" {
	start_holder b -t 10s --on-lost ignore
	local token fence
	token=$(env_of b RLOCK_TOKEN)
	fence=$(env_of b RLOCK_FENCE)
	# an operator's action is said even with -q (options.md, -q)
	run -0 --separate-stderr rlock -q -k b --break
	assert_equal "$output" ""
	assert_regex "$stderr" "broke rlock:\{b\}: token $token, held by $(hostname) pid $HOLDER_PID \($HOLD b\), fence $fence"
	key_absent 'rlock:{b}'
	key_absent 'rlock:{b}:owner'
	assert_equal "$(rcli GET 'rlock:{b}:fence')" "$fence"
	run -0 rlock -k b --status
	assert_line --index 0 "rlock:{b} is free (last fence $fence)"
	# who broke it is kept with the name for a while (issue 27)
	assert_line --index 1 --regexp "^broken +[0-9.ms]+ ago .* by $(hostname) pid [0-9]+ "
	touch b.release
	rlock_wait "$HOLDER_PID"
}

@test "--break: the holder loses its lease, its command is terminated, rlock exits 79" {
	start_holder b -t 1s --kill-after 2s
	run -0 rlock -k b --break
	rlock_wait "$HOLDER_PID" 30
	assert_equal "$RLOCK_STATUS" 79
	wait_until 30 pidfile_gone b.pid
	[[ ! -e b.end ]] || fail "the command ran to its end after the lock was broken"
	assert_regex "$(cat "$HOLDER_ERR")" 'lost'
}

@test "--break wakes a waiter at once (not after the holder's TTL)" {
	start_holder b -t 30s
	rlock_bg -k b -- touch got
	local waiter=$RLOCK_PID
	wait_until 30 has_waiter b
	local t0
	t0=$(now_ms)
	run -0 rlock -k b --break
	rlock_wait "$waiter" 20
	assert_equal "$RLOCK_STATUS" 0
	[[ -e got ]]
	# Woken by the release notification (the publish itself is checked below): long
	# before the holder's 30 s lease could have run out. How fast is a figure, printed.
	local took=$(($(now_ms) - t0))
	echo "# --break → waiter done: ${took} ms (holder's lease 30 s)" >&3
	((took < 20000)) || fail "the waiter took ${took}ms to notice the break"
	# the broken holder goes on until its renewal notices; kill it in teardown
}

@test "--break on a free lock: warns 'not held', exit 0; -q: nothing" {
	run -0 --separate-stderr rlock -k b --break
	assert_regex "$stderr" 'not held'
	assert_equal "$output" ""
	run -0 --separate-stderr rlock -q -k b --break
	assert_equal "$stderr$output" ""
}

@test "--break on a lock held by a plain SET: removed" {
	rcli SET 'rlock:{f}' foreign-token PX 30000 >/dev/null
	run -0 --separate-stderr rlock -k f --break
	assert_regex "$stderr" 'broke rlock:\{f\}: token foreign-token'
	key_absent 'rlock:{f}'
}

@test "--break publishes on PREFIX{NAME}:released" {
	start_holder b -t 10s --on-lost ignore
	rcli SUBSCRIBE 'rlock:{b}:released' >sub.out &
	local sub=$!
	track_pid "$sub"
	wait_until 30 has_waiter b
	run -0 rlock -k b --break
	wait_until 30 file_has_lines sub.out 6
	kill "$sub"
	touch b.release
	rlock_wait "$HOLDER_PID"
}

# ---------------------------------------------------------------------------------
# --list

@test "--list with nothing held: header only; --json: empty array" {
	run -0 rlock -k l -- true # leaves a fence counter behind, which is not a lock
	run -0 rlock --list
	assert_equal "${#lines[@]}" 1
	assert_regex "${lines[0]}" '^NAME +HOST +PID +HELD +TTL +RENEWED +COMMAND$'
	run -0 rlock --list --json
	assert_equal "$(jq -c . <<<"$output")" '{"schema":1,"prefix":"rlock:","locks":[]}'
}

@test "--list: a lock it cannot read (a key of another type under its name) is named in the one line" {
	# Anyone can SET a key where rlock keeps a hash: the listing then cannot be whole
	# (69, nothing on stdout); the line said "status: server error: WRONGTYPE ..." and
	# left the operator to find which of the names it was.
	rcli SET 'rlock:{odd}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	rcli SET 'rlock:{odd}:owner' not-a-hash PX 30000 >/dev/null
	run -69 --separate-stderr rlock --list
	assert_equal "$output" ""
	assert_equal "$stderr" "$(head -1 <<<"$stderr")"
	assert_regex "$stderr" "^rlock: --list: rlock:\{odd\}: .*WRONGTYPE"
	rcli DEL 'rlock:{odd}' 'rlock:{odd}:owner' >/dev/null
}

@test "--status of a name whose --preempt key is of another type: not 'free' (every acquire is refused), 69 naming it; --break still breaks" {
	# the acquire reads PREFIX{NAME}:preempt and fails on it (69): --status said free (0)
	rcli SET 'rlock:{op}:preempt' not-a-hash PX 30000 >/dev/null
	run -69 --separate-stderr rlock -k op -n -- true
	assert_regex "$stderr" WRONGTYPE
	run -69 --separate-stderr rlock -k op --status
	assert_equal "$output" ""
	assert_regex "$stderr" WRONGTYPE
	run -69 --separate-stderr rlock --list
	assert_regex "$stderr" "^rlock: --list: rlock:\{op\}: .*WRONGTYPE"
	# an operator can still break a holder there (the stray key is not the holder's)
	rcli SET 'rlock:{op}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	run -0 --separate-stderr rlock -k op --break
	assert_regex "$stderr" 'broke rlock:\{op\}: token 0123456789abcdef0123456789abcdef'
	rcli DEL 'rlock:{op}:preempt' >/dev/null
	run -0 rlock -k op --status
}

# slow_locks N: N locks held (bare lock keys, a 2 min lease), each one status request
slow_locks() {
	local i
	for ((i = 1; i <= $1; i++)); do
		echo "SET rlock:{slow$i} 0123456789abcdef0123456789abcdef PX 120000"
	done | rcli >/dev/null
	local n
	n=$(rlock --list | grep -c '') || true
	assert_equal "$n" $(($1 + 1))
}

@test "--list against a slow server: -w bounds the whole listing (69, one line, nothing on stdout)" {
	# Every reply 100 ms late, each well within its --io-timeout: 60 locks took ~6 s
	# whatever -w said (each request had its own io-timeout, none the whole).
	slow_locks 60
	delay_proxy_start 100
	local t0 ms
	t0=$(now_ms)
	run -69 --separate-stderr rlock -u "$PROXY_URL" --io-timeout 2s -w 1 --list
	ms=$(($(now_ms) - t0))
	echo "# --list -w 1 over 60 locks, replies 100 ms late: 69 after ${ms} ms" >&3
	assert_equal "$output" ""
	assert_one_line_error
	assert_regex "$stderr" "^rlock: --list: .*1\.0 s.*-w"
	# not before -w; after it, within a loaded machine's slow start and the last
	# reply's io wait (the listing unbounded takes 6 s and exits 0: the line and the
	# status above tell it apart)
	((ms >= 1000 && ms < 10000)) || fail "took ${ms} ms (-w 1)"
}

@test "--list against a slow server: without -w, 30 x --io-timeout bounds the whole listing" {
	# --io-timeout 0.4 s: the listing has 12 s; 100 locks, each reply 150 ms late, need
	# ~15 (each reply keeps 250 ms of its io deadline for a loaded machine)
	slow_locks 100
	delay_proxy_start 150
	local t0 ms
	t0=$(now_ms)
	run -69 --separate-stderr rlock -u "$PROXY_URL" --io-timeout 0.4 --list --json
	ms=$(($(now_ms) - t0))
	echo "# --list over 100 locks, replies 150 ms late, io-timeout 0.4 s: 69 after ${ms} ms" >&3
	assert_equal "$output" ""
	assert_one_line_error
	assert_regex "$stderr" "^rlock: --list: .*12\.0 s.*--io-timeout"
	((ms >= 12000 && ms < 30000)) || fail "took ${ms} ms (30 x 0.4 s)"
	# a -w long enough: the whole listing (~15 s: longer than the 12 s that 30 x 0.4 s allow)
	run -0 --separate-stderr rlock -u "$PROXY_URL" --io-timeout 0.4 -w 60 --list --json
	assert_equal "$(jq '.locks | length' <<<"$output")" 100
}

@test "--list shows every held lock, aligned, and only locks under the prefix" {
	start_holder one -t 10s
	local pid1=$HOLDER_PID
	start_holder two -t 20s
	local pid2=$HOLDER_PID
	start_holder three --prefix other: -t 10s
	local pid3=$HOLDER_PID
	rcli SET unrelated x >/dev/null
	run -0 rlock --list
	assert_equal "${#lines[@]}" 3
	assert_regex "${lines[0]}" '^NAME +HOST +PID +HELD +TTL +RENEWED +COMMAND$'
	assert_line --regexp "^one +$(hostname) +$pid1 +[0-9].* +$HOLD one\$"
	assert_line --regexp "^two +$(hostname) +$pid2 +[0-9].* +$HOLD two\$"
	# columns line up: the HOST column starts at the same offset on every line
	local h0 h1 h2
	h0=$(awk 'NR==1 {print index($0, "HOST")}' <<<"$output")
	h1=$(awk 'NR==2 {print index($0, $2)}' <<<"$output")
	h2=$(awk 'NR==3 {print index($0, $2)}' <<<"$output")
	assert_equal "$h1" "$h0"
	assert_equal "$h2" "$h0"
	run -0 rlock --prefix other: --list
	assert_equal "${#lines[@]}" 2
	assert_line --regexp "^three +$(hostname) +$pid3 "
	touch one.release two.release three.release
	rlock_wait "$pid1"
	rlock_wait "$pid2"
	rlock_wait "$pid3"
}

@test "--list --json: one object, each lock a holder object" {
	start_holder one -t 10s
	local pid1=$HOLDER_PID
	start_holder two -t 10s
	local pid2=$HOLDER_PID
	run -0 --separate-stderr rlock --list --json
	assert_equal "${#lines[@]}" 1
	local j=$output
	assert_equal "$(jq -r .prefix <<<"$j")" 'rlock:'
	assert_equal "$(jq -r '.locks | length' <<<"$j")" 2
	assert_equal "$(jq -r '[.locks[].name] | sort | join(",")' <<<"$j")" 'one,two'
	assert_equal "$(jq -r '.locks[] | select(.name=="one") | .pid' <<<"$j")" "$pid1"
	assert_equal "$(jq -r '.locks[] | select(.name=="two") | .key' <<<"$j")" 'rlock:{two}'
	assert_equal "$(jq -r '.locks[] | select(.name=="two") | .fence' <<<"$j")" "$(env_of two RLOCK_FENCE)"
	jq -e '.locks | all(.held == true and .host != "" and (.ttl_left_ms|type)=="number")' <<<"$j" >/dev/null
	touch one.release two.release
	rlock_wait "$pid1"
	rlock_wait "$pid2"
}

@test "--list uses SCAN, never KEYS, and walks every SCAN page" {
	# 3000 unrelated keys: SCAN needs many round trips to find the two locks
	local i
	for ((i = 0; i < 3000; i++)); do echo "SET filler:$i x"; done | rcli >/dev/null
	start_holder one -t 10s
	local pid1=$HOLDER_PID
	start_holder two -t 10s
	local pid2=$HOLDER_PID
	rcli MONITOR >monitor.out &
	local mon=$!
	track_pid "$mon"
	wait_until 30 grep -q OK monitor.out
	run -0 rlock --list --json
	assert_equal "$(jq -r '[.locks[].name] | sort | join(",")' <<<"$output")" 'one,two'
	rcli SET end-of-list-marker 1 >/dev/null
	wait_until 30 grep -q end-of-list-marker monitor.out
	kill "$mon"
	grep -qi '"scan"' monitor.out || fail "no SCAN seen"
	! grep -qi '"keys"' monitor.out || fail "KEYS was used"
	touch one.release two.release
	rlock_wait "$pid1"
	rlock_wait "$pid2"
}

# ---------------------------------------------------------------------------------
# --min-hold

@test "--min-hold: a short job keeps the lock until DUR after its start" {
	# 20 s: the checks below must all fit in the window, also in a slow (valgrind) pass
	run -0 rlock -k m --min-hold 20s -- touch first
	[[ -e first ]]
	key_exists 'rlock:{m}'
	local pttl
	pttl=$(rcli PTTL 'rlock:{m}')
	((pttl > 0 && pttl <= 20000)) || fail "pttl $pttl not in (0, 20000]"
	# a second "host" firing the same cron job: busy → 75 (or skip silently with -E 0)
	run -75 rlock -n -k m -- touch second
	run -0 rlock -n -E 0 -k m -- touch second
	[[ ! -e second ]]
	run -75 rlock -k m --status
	# after the window the lock expires by itself: its keys carry the remaining window
	# as TTL (checked above); let the window pass at once rather than wait it out
	pttl=$(rcli PTTL 'rlock:{m}:owner')
	((pttl > 0 && pttl <= 20000)) || fail "owner pttl $pttl not in (0, 20000]"
	rcli PEXPIRE 'rlock:{m}' 1 >/dev/null
	rcli PEXPIRE 'rlock:{m}:owner' 1 >/dev/null
	wait_until 6 key_absent 'rlock:{m}'
	run -0 rlock -n -k m -- touch second
	[[ -e second ]]
}

@test "--min-hold: a job longer than DUR releases at its end as usual" {
	run -0 rlock -k m --min-hold 200ms -- sleep 0.5
	key_absent 'rlock:{m}'
	key_absent 'rlock:{m}:owner'
	run -0 rlock -n -k m -- true
}

@test "--min-hold 0 (the default) deletes the lock at once" {
	run -0 rlock -k m -- true
	key_absent 'rlock:{m}'
	run -0 rlock -n -k m -- true
}

@test "--min-hold keeps the command's status" {
	run -3 rlock -k m --min-hold 2s -- sh -c 'exit 3'
	run -75 rlock -n -k m -- true
}

@test "--min-hold: two cron hosts fired at the same minute run the job once" {
	# host A runs the job (fast); host B fires a moment later, inside the window
	run -0 rlock -n -E 0 --min-hold 5s -k nightly -c 'echo ran >>runs'
	run -0 rlock -n -E 0 --min-hold 5s -k nightly -c 'echo ran >>runs'
	assert_equal "$(wc -l <runs)" 1
}

# ---------------------------------------------------------------------------------
# re-entrancy

@test "nested rlock on the same key runs its command directly (no deadlock)" {
	# -w bounds the inner one: a deadlock would show as 75 after 2 s, not as a hang
	run -5 rlock -k r -- "$RLOCK" -w 2s -k r -c 'echo "inner key=$RLOCK_KEY"; exit 5'
	assert_output 'inner key=rlock:{r}'
	key_absent 'rlock:{r}'
}

@test "nested rlock on the same key: same token, lock still held, outer releases" {
	run -0 rlock -k r -c '
		outer=$RLOCK_TOKEN
		'"$RLOCK"' -w 2s -k r -c "[ \"\$RLOCK_TOKEN\" = \"$outer\" ] && echo same-token"
		st=$?
		'"$RLOCK"' -n -k r --status >/dev/null; echo "status-after-inner=$?"
		exit $st'
	assert_line same-token
	assert_line 'status-after-inner=75'
	key_absent 'rlock:{r}'
}

@test "nested rlock on a different key locks normally" {
	run -6 rlock -k r -- "$RLOCK" -n -k other -c '
		echo "inner key=$RLOCK_KEY"
		'"$RLOCK"' -k other --status >/dev/null; echo "other held=$?"
		'"$RLOCK"' -k r --status >/dev/null; echo "r held=$?"
		exit 6'
	assert_line 'inner key=rlock:{other}'
	assert_line 'other held=75'
	assert_line 'r held=75'
	key_absent 'rlock:{r}'
	key_absent 'rlock:{other}'
}

@test "a stale or forged RLOCK_TOKEN does not bypass the lock" {
	start_holder r -t 10s
	RLOCK_KEY='rlock:{r}' RLOCK_TOKEN=forged-token run -75 rlock -n -k r -- touch ran
	[[ ! -e ran ]]
	touch r.release
	rlock_wait "$HOLDER_PID"
	# the old holder's token, after it released: locks normally (the key appears)
	local old
	old=$(env_of r RLOCK_TOKEN)
	RLOCK_KEY='rlock:{r}' RLOCK_TOKEN=$old run -0 rlock -n -k r -c "$RLOCK"' -k r --status >/dev/null; echo held=$?'
	assert_output 'held=75'
}

@test "a nested rlock inherits re-entrancy only for the same prefix+name" {
	# same name, other prefix: a different lock, acquired normally
	run -0 rlock -k r -- "$RLOCK" -n --prefix p2: -k r -c 'echo "inner key=$RLOCK_KEY"'
	assert_output 'inner key=p2:{r}'
}

# ---------------------------------------------------------------------------------
# waiting: a live status line on a terminal only

# run_on_tty OUT CMD: run CMD under a pseudo-terminal (script(1)) in the background,
# its terminal output in OUT. Sets TTY_PID.
run_on_tty() {
	local out=$1
	shift
	(clean_exec script -qfec "$*" /dev/null) </dev/null >"$out" 2>&1 &
	TTY_PID=$!
	track_pid "$TTY_PID"
}

# drawn_at_least N FILE: the live line was drawn (\r ESC[K rlock: waiting) N times.
drawn_at_least() {
	(($(grep -o $'\r\033\\[Krlock: waiting' "$2" | wc -l) >= $1))
}

@test "waiting on a terminal: one live line, redrawn with \\r, cleared when acquired" {
	start_holder w -t 10s
	# a wide terminal: the line is cut to the terminal's width (waiter.bats tests that)
	run_on_tty tty.out "stty cols 250; exec $RLOCK -k w -- echo acquired"
	# let it redraw at least once (about every second); slow under valgrind
	wait_until 30 drawn_at_least 2 tty.out
	touch w.release
	rlock_wait "$TTY_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	local out
	out=$(cat tty.out)
	# the line says what it waits for and who holds it
	[[ $out =~ rlock:\ waiting\ [0-9]+s\ for\ \'w\':\ held\ by\ $(hostname)\ pid\ $HOLDER_PID\ \($HOLD\ w\)\ for\ [0-9]+s ]] ||
		fail "no status line in: $(cat -A tty.out)"
	# redrawn in place: several copies, each preceded by \r ESC[K, never a newline
	local draws
	draws=$(grep -o $'\r\033\\[Krlock: waiting' tty.out | wc -l)
	((draws >= 2)) || fail "drawn $draws times: $(cat -A tty.out)"
	[[ $(grep -c 'rlock: waiting' tty.out) -eq 1 ]] || fail "status line spans several lines: $(cat -A tty.out)"
	# cleared before the command's output
	[[ $out == *$'\r\033[Kacquired'* ]] || fail "line not cleared: $(cat -A tty.out)"
}

@test "waiting on a terminal, --wait expires: the line is cleared before the error" {
	start_holder w -t 10s
	run_on_tty tty.out "$RLOCK" -w 1.5s -k w -- echo acquired
	rlock_wait "$TTY_PID" 30
	assert_equal "$RLOCK_STATUS" 75
	grep -q 'rlock: waiting' tty.out || fail "no status line: $(cat -A tty.out)"
	grep -q $'\r\033\\[Krlock: lock .w. is busy' tty.out || fail "not cleared before the error: $(cat -A tty.out)"
	run ! grep -q acquired tty.out
	touch w.release
	rlock_wait "$HOLDER_PID"
}

@test "waiting on a terminal with -q: no status line" {
	start_holder w -t 10s
	run_on_tty tty.out "$RLOCK" -q -k w -- echo acquired
	wait_until 30 has_waiter w
	sleep 1.2 # observation window: the line would have been drawn by now
	touch w.release
	rlock_wait "$TTY_PID" 30
	assert_equal "$RLOCK_STATUS" 0
	grep -q acquired tty.out
	! grep -q 'waiting' tty.out || fail "status line shown with -q: $(cat -A tty.out)"
}

@test "waiting with stderr not a terminal: no status line" {
	start_holder w -t 10s
	rlock_bg -k w -- echo acquired
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 has_waiter w
	sleep 1.2 # observation window
	touch w.release
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(cat "$werr")" ""
}

@test "waiting on a terminal but stderr redirected to a file: no status line" {
	start_holder w -t 10s
	run_on_tty tty.out "$RLOCK -k w -- echo acquired 2>$BATS_TEST_TMPDIR/w.err"
	wait_until 30 has_waiter w
	sleep 1.2 # observation window
	touch w.release
	rlock_wait "$TTY_PID" 30
	grep -q acquired tty.out
	! grep -q 'waiting' tty.out w.err || fail "status line shown: $(cat -A tty.out w.err)"
}

@test "waiting with -v and no terminal: one plain 'busy ... waiting' line" {
	start_holder w -t 10s
	rlock_bg -v -k w -- echo acquired
	local waiter=$RLOCK_PID werr=$RLOCK_ERR
	wait_until 30 has_waiter w
	sleep 1.2 # observation window: no redraws must follow
	touch w.release
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(grep -c "lock 'w' is busy.*waiting" "$werr")" 1
	! grep -q $'\r' "$werr" || fail "carriage return in a non-terminal log: $(cat -A "$werr")"
	! grep -q 'rlock: waiting' "$werr" || fail "live line in a non-terminal log"
}

# ---------------------------------------------------------------------------------
# eviction warning

@test "maxmemory-policy allkeys-lru: one warning that the lock can be evicted" {
	# -v looks at the policy at once (else at the first renewal, ttl/3: eviction.bats)
	run -0 --separate-stderr rlock -v -u "$LRU_URL" -k e -- true
	assert_regex "$stderr" 'warning:.*maxmemory-policy.*allkeys-lru.*evict'
	assert_equal "$(grep -c 'maxmemory-policy' <<<"$stderr")" 1
}

@test "maxmemory-policy volatile-lru: warned too" {
	run -0 --separate-stderr rlock -v -u "$VLRU_URL" -k e -- true
	assert_regex "$stderr" 'warning:.*maxmemory-policy.*volatile-lru.*evict'
}

@test "maxmemory-policy noeviction: no warning" {
	assert_equal "$(rcli CONFIG GET maxmemory-policy | sed -n 2p)" noeviction
	run -0 --separate-stderr rlock -k e -- true
	assert_equal "$stderr" ""
	run -0 --separate-stderr rlock -v -k e -- true
	[[ $stderr != *maxmemory-policy*evict* ]] || fail "warned on noeviction: $stderr"
}

@test "eviction warning: silenced by -q, the command still runs" {
	# looked at after the first renewal (ttl/3), and the marker says it would be warned
	redis-cli -p "$LRU_PORT" DEL rlock:eviction-warned >/dev/null
	run -0 --separate-stderr rlock -q -t 1s -u "$LRU_URL" -k e -- sh -c '
		i=0
		until [ "$(redis-cli -p "$0" EXISTS rlock:eviction-warned)" = 1 ] || [ $i -ge 600 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		echo ran' "$LRU_PORT"
	assert_output ran
	assert_equal "$(redis-cli -p "$LRU_PORT" EXISTS rlock:eviction-warned)" 1
	assert_equal "$stderr" ""
}

@test "--list: glob characters in the prefix match literally (SCAN MATCH is escaped)" {
	start_holder one --prefix 'ab:' -t 10s
	local pid1=$HOLDER_PID
	local p
	for p in 'a*' 'a?' 'a[b]:' "a\\" '*'; do
		run -0 rlock --prefix "$p" --list --json
		assert_equal "$(jq -r '.locks | length' <<<"$output")" 0
	done
	run -0 rlock --prefix 'ab:' --list --json
	assert_equal "$(jq -r '.locks[0].name' <<<"$output")" one
	touch one.release
	rlock_wait "$pid1"
}

@test "--list: lock names with glob characters are listed as they are" {
	start_holder 'x*' -t 10s
	local pid1=$HOLDER_PID
	run -0 rlock --list --json
	assert_equal "$(jq -r '[.locks[].name] | join(",")' <<<"$output")" 'x*'
	touch 'x*.release'
	rlock_wait "$pid1"
}

@test "--prefix '': rlock leaves the user's own {NAME} keys alone (one line, 69, nothing written or deleted)" {
	# No prefix puts rlock's keys among the user's ({user42} is a common Cluster hash
	# tag): --break deleted a string SET at {x} ("broke {x}: token hello") and a hash at
	# {y}:owner, --reset a list at {z}:history, an acquire overwrote {y}:owner and its
	# release deleted it, --status showed the user's value as a token, --list failed (69)
	# on a hash at {h}. A name is rlock's once its fence counter has counted an acquisition.
	rcli SET '{x}' hello >/dev/null
	rcli HSET '{y}:owner' name bob >/dev/null
	rcli RPUSH '{z}:history' a >/dev/null
	rcli HSET '{h}' a b >/dev/null
	local tail="that rlock did not write \\(no acquisition counted in \\{.\\}:fence; --prefix '' shares the keyspace\\): left as it is$"
	run -69 --separate-stderr rlock --prefix '' -k x --break
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: break: \\{x\\} holds a string $tail"
	run -69 --separate-stderr rlock --prefix '' -k y --break
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: break: \\{y\\}:owner holds a hash $tail"
	run -69 --separate-stderr rlock --prefix '' -k z --reset
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: reset: \\{z\\}:history holds a list $tail"
	run -69 --separate-stderr rlock --prefix '' -k z --history
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: history: \\{z\\}:history holds a list $tail"
	run -69 --separate-stderr rlock --prefix '' -k y -- true
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: acquire: \\{y\\}:owner holds a hash $tail"
	run -69 --separate-stderr rlock --prefix '' -k y -s -- true
	run -69 --separate-stderr rlock --prefix '' -k x -n -- true
	run -69 --separate-stderr rlock --prefix '' -k x --status
	assert_equal "$output" ""
	assert_regex "$stderr" "^rlock: 127\\.0\\.0\\.1:[0-9]+: status: \\{x\\} holds a string $tail"
	run -0 rlock --prefix '' --list --json
	assert_equal "$(jq -c .locks <<<"$output")" '[]'
	assert_equal "$(rcli GET '{x}') $(rcli HGETALL '{y}:owner' | xargs) $(rcli LRANGE '{z}:history' 0 -1)" 'hello name bob a'
	assert_equal "$(rcli EXISTS '{x}:fence' '{y}:fence' '{y}:history' '{z}:fence')" 0
	# rlock's own names under the empty prefix: taken, listed, broken as under any prefix
	start_holder mine --prefix '' -t 1s
	run -0 rlock --prefix '' --list --json
	assert_equal "$(jq -r '[.locks[].name] | join(",")' <<<"$output")" mine
	run -0 rlock --prefix '' -k mine --break
	assert_output --partial 'broke {mine}: token '
	rlock_wait "$HOLDER_PID"
	assert_equal "$(rcli GET '{x}') $(rcli HGET '{h}' a)" 'hello b'
}

@test "--list leaves out keys whose name -k refuses (a space, a newline, a non-ASCII byte, none)" {
	local k
	for k in 'rlock:{a b}' $'rlock:{n\nl}' $'rlock:{\xff}' 'rlock:{}'; do
		rcli SET "$k" 0123456789abcdef0123456789abcdef PX 60000 >/dev/null
	done
	run -0 rlock --list --json
	assert_equal "$(jq -c .locks <<<"$output")" '[]'
}

# ---------------------------------------------------------------------------------
# issue 7 items 14, 15; issue 14 items 10, 16

# forge_holder NAME PID: a lock whose owner hash carries an escape sequence in every
# text field (anyone with write access to the hash could do this).
forge_holder() {
	rcli SET "rlock:{$1}" forged PX 60000 >/dev/null
	rcli HSET "rlock:{$1}:owner" host $'h\e]0;pwned\a' pid "$2" user $'u\e[2J' \
		cmd $'c\e[31mred' start 1700000000000 ttl 60000 >/dev/null
	rcli PEXPIRE "rlock:{$1}:owner" 60000 >/dev/null
}

@test "--status and --list escape every holder field, the pid too (regression, issue 7.14)" {
	forge_holder esc $'12\e[2J\e]0;x\a'
	run -75 rlock -k esc --status
	[[ $output != *$'\e'* && $output != *$'\a'* ]] || fail "raw escape in --status: $(cat -v <<<"$output")"
	# the pid is parsed once as a number (issue 9): a forged one is unknown, shown '?'
	assert_line --regexp '^ +pid +\?$'
	assert_line --regexp '^ +host +h\\x1b\]0;pwned\\x07$'
	run -0 rlock --list
	[[ $output != *$'\e'* && $output != *$'\a'* ]] || fail "raw escape in --list: $(cat -v <<<"$output")"
	assert_line --regexp '^esc +h\\x1b.* +\? '
}

@test "--status escapes the last --break's record, its fence too" {
	# PREFIX{NAME}:broken is plain Redis data: every field of it is shown escaped.
	rcli HSET 'rlock:{bk}:broken' host $'h\e[1m' pid 5 user $'u\e[2m' at "$(now_ms)" \
		tokens $'t\e[3m' fence $'7\e[2J\r' label $'l\a' >/dev/null
	rcli PEXPIRE 'rlock:{bk}:broken' 60000 >/dev/null
	run -0 rlock -k bk --status
	[[ $output != *$'\e'* && $output != *$'\a'* && $output != *$'\r'* ]] ||
		fail "raw control character in --status: $(cat -v <<<"$output")"
	assert_line --regexp '^broken .* by h\\x1b\[1m pid 5 \(user u\\x1b\[2m\) \[l\\x07\]: token t\\x1b\[3m, fence 7\\x1b\[2J\\x0d$'
}

@test "--status --json: unknown holder fields are null, a non-numeric pid too (issue 14.16)" {
	rcli SET 'rlock:{f}' foreign-token PX 30000 >/dev/null
	run -75 rlock -k f --status --json
	assert_equal "$(jq -c '[.host, .pid, .user, .command, .start_ms, .held_ms, .ttl_ms]' <<<"$output")" \
		'[null,null,null,null,null,null,null]'
	jq -e '(.ttl_left_ms|type)=="number" and .min_hold==false and .kept_until_ms==null' <<<"$output" >/dev/null
	# a lock without expiry: ttl_left_ms null, not -1
	rcli SET 'rlock:{f}' foreign-token >/dev/null
	run -75 rlock -k f --status --json
	assert_equal "$(jq -c .ttl_left_ms <<<"$output")" null
	forge_holder g 'not-a-pid'
	run -75 rlock -k g --status --json
	assert_equal "$(jq -c .pid <<<"$output")" null
	assert_equal "$(jq -r .host <<<"$output")" $'h\e]0;pwned\a'
	run -0 rlock --list --json
	assert_equal "$(jq -c '[.locks[] | .pid]' <<<"$output")" '[null,null]'
}

@test "--list shows a lock whose name is exactly 512 bytes (regression, issue 7.15)" {
	local name
	name=$(printf 'n%.0s' {1..512})
	rlock_bg -k "$name" -t 20s -- "$HOLD" long
	local pid=$RLOCK_PID
	wait_until 30 test -e long.started
	run -0 rlock --list --json
	assert_equal "$(jq -r '.locks[0].name | length' <<<"$output")" 512
	run -0 rlock --list
	assert_equal "${#lines[@]}" 2
	touch long.release
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "--status / --list / --help to a full disk: 74 and one line, not 70 (regression, issue 7.15)" {
	[[ -w /dev/full ]] || ci_skip "no /dev/full"
	run -74 --separate-stderr bash -c '"$RLOCK" -k s --status >/dev/full'
	assert_one_line_error
	assert_regex "$stderr" 'cannot write to standard output'
	run -74 --separate-stderr bash -c '"$RLOCK" --list >/dev/full'
	assert_one_line_error
	run -74 --separate-stderr bash -c '"$RLOCK" --list --json >/dev/full'
	run -74 --separate-stderr bash -c '"$RLOCK" --help >/dev/full'
	assert_one_line_error
}

@test "--status during --min-hold: kept by --min-hold until T, the command has exited (issue 14.10)" {
	run -0 rlock -k m --min-hold 30s -- true
	run -75 rlock -k m --status
	assert_line --index 0 'rlock:{m} is held (kept by --min-hold)'
	assert_line --regexp '^ +pid +[0-9]+ \(exited\)$'
	assert_line --regexp '^ +kept +by --min-hold until [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}: its command has exited$'
	run -75 rlock -k m --status --json
	jq -e '.min_hold == true and (.kept_until_ms|type) == "number"' <<<"$output" >/dev/null
	local now until
	now=$(now_ms)
	until=$(jq -r .kept_until_ms <<<"$output")
	((until > now && until <= now + 31000)) || fail "kept_until_ms $until vs now $now"
	run -0 rlock --list
	assert_line --regexp '^m .*\[kept by --min-hold\] true$'
	# a held lock that is not kept says nothing of the kind
	start_holder s -t 10s
	run -75 rlock -k s --status
	assert_line --index 0 'rlock:{s} is held'
	refute_output --partial 'min-hold'
	run -75 rlock -k s --status --json
	jq -e '.min_hold == false and .kept_until_ms == null' <<<"$output" >/dev/null
	touch s.release
	rlock_wait "$HOLDER_PID"
}

@test "--reset and --break of a name whose key holds another type (set by hand): deleted first and named, the live holder stays" {
	# They failed on it (69, WRONGTYPE), as every acquire did: no rlock command could
	# clear the stray key, only a DEL by hand.
	rcli SET 'rlock:{odd}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	rcli SET 'rlock:{odd}:owner' not-a-hash PX 30000 >/dev/null
	run -0 --separate-stderr rlock -k odd --reset
	assert_regex "$stderr" '^rlock: reset rlock:\{odd\}: deleted rlock:\{odd\}:owner: it held a string, not what rlock keeps there'
	assert_regex "$stderr" 'rlock:\{odd\} is still held by'
	assert_equal "$(rcli GET 'rlock:{odd}')" 0123456789abcdef0123456789abcdef
	rcli SET 'rlock:{odd}:owner' not-a-hash PX 30000 >/dev/null
	run -0 --separate-stderr rlock -k odd --break
	assert_regex "$stderr" '^rlock: break rlock:\{odd\}: deleted rlock:\{odd\}:owner: it held a string'
	assert_regex "$stderr" 'broke rlock:\{odd\}: token 0123456789abcdef0123456789abcdef'
	key_absent 'rlock:{odd}'
}

@test "an acquire refused by a stray key of another type writes nothing first (no phantom holder, no writer mark, no history), only the fence may count" {
	# A shared request with a stray :meta left its entry in :holders (the name busy for
	# its ttl, a run in the history); a plain one with a stray :queue, a writer mark.
	local i=0 mode sfx left
	for mode in '' -s '-l 2' '-l 2 --fair' --fair '-s --lock-delay 5s' '--once-per 1h'; do
		for sfx in '' :owner :holders :meta :limit :queue :qlease :qmeta :writer :waiters \
			:delay :preempt :supersede :broken :history :history:run :history:runs; do
			i=$((i + 1))
			rcli SADD "rlock:{pw$i}$sfx" stray >/dev/null
			# shellcheck disable=SC2086 # $mode: its words
			run rlock -k "pw$i" -n $mode -- true
			if ((status == 69)); then
				left=$(rcli --scan --pattern "rlock:{pw$i}*" | grep -vxF -e "rlock:{pw$i}$sfx" \
					-e "rlock:{pw$i}:fence" || true)
				assert_equal "$mode [$sfx]: ${left//$'\n'/ }" "$mode [$sfx]: "
			fi
		done
	done
	# a --fair waiter (the lock held): a stray :qmeta left its place in the queue, with
	# no lease, binding the queue for the waiter's ttl
	rcli SET 'rlock:{pwq}' 0123456789abcdef0123456789abcdef PX 30000 >/dev/null
	rcli SADD 'rlock:{pwq}:qmeta' stray >/dev/null
	run -69 --separate-stderr rlock -k pwq -w 5 --fair -- true
	assert_regex "$stderr" WRONGTYPE
	key_absent 'rlock:{pwq}:queue'
	rcli DEL 'rlock:{pwq}' 'rlock:{pwq}:qmeta' >/dev/null
}

@test "stray keys of another type: compare-and-break deletes them too (refused: 79, not 69); a refused --fair, --supersede or --preempt waiter leaves no place, record or request behind" {
	local t=0123456789abcdef0123456789abcdef left k n sfx opt
	# --break --token/--if-fence: the stray deleted and named, then the compare as ever
	rcli SADD 'rlock:{cs}:owner' stray >/dev/null
	run -79 --separate-stderr rlock -k cs --break --token "$t"
	assert_regex "$stderr" '^rlock: break rlock:\{cs\}: deleted rlock:\{cs\}:owner: it held a set'
	key_absent 'rlock:{cs}:owner'
	rcli SET 'rlock:{cs}' "$t" PX 30000 >/dev/null
	rcli SADD 'rlock:{cs}:holders' stray >/dev/null
	run -79 --separate-stderr rlock -k cs --break --if-fence 99
	assert_regex "$stderr" 'deleted rlock:\{cs\}:holders: it held a set'
	assert_equal "$(rcli GET 'rlock:{cs}')" "$t"
	rcli SADD 'rlock:{cs}:holders' stray >/dev/null
	run -0 --separate-stderr rlock -k cs --break --token "$t"
	assert_regex "$stderr" 'deleted rlock:\{cs\}:holders: it held a set'
	key_absent 'rlock:{cs}'
	# a waiter refused by a stray (69, loud) writes nothing it would leave behind: a
	# --fair place (bound the queue 5 s), a :supersede record or a --preempt request
	# (till their ttl); the lock held by hand, the stray at the key the busy answer reads
	for k in 'fw :owner --fair' 'fs :waiters --supersede' 'fp :waiters --preempt'; do
		read -r n sfx opt <<<"$k"
		rcli SET "rlock:{$n}" "$t" PX 30000 >/dev/null
		rcli HSET "rlock:{$n}:owner" preemptible 1 >/dev/null
		rcli DEL "rlock:{$n}$sfx" >/dev/null
		rcli SET "rlock:{$n}$sfx" stray PX 30000 >/dev/null
		run -69 --separate-stderr timeout -k 5 20 "$RLOCK" -k "$n" -w 5 "$opt" -- true
		assert_regex "$stderr" WRONGTYPE
		left=$(rcli --scan --pattern "rlock:{$n}*" | grep -vxF -e "rlock:{$n}" \
			-e "rlock:{$n}:owner" -e "rlock:{$n}$sfx" || true)
		assert_equal "$opt: ${left//$'\n'/ }" "$opt: "
	done
	# a --fair request behind shared holders whose :meta is a stray
	rcli ZADD 'rlock:{fm}:holders' 9999999999999 "$t" >/dev/null
	rcli SET 'rlock:{fm}:limit' shared >/dev/null
	rcli SET 'rlock:{fm}:meta' stray >/dev/null
	run -69 --separate-stderr timeout -k 5 20 "$RLOCK" -k fm -w 5 --fair -- true
	left=$(rcli --scan --pattern 'rlock:{fm}*' | grep -vxF -e 'rlock:{fm}:holders' \
		-e 'rlock:{fm}:limit' -e 'rlock:{fm}:meta' || true)
	assert_equal "${left//$'\n'/ }" ""
}

@test "operator messages over leftover keys name no fence the name does not have: a lock key whose record is gone ('fence ?', not 0), a fence counter of another type (not 'last fence 0')" {
	local t=0123456789abcdef0123456789abcdef
	# the lock key left without its :owner record (deleted, evicted): a refused
	# compare-and-break said "fence 0", a fence the holder never had
	rcli SET 'rlock:{lf}' "$t" PX 30000 >/dev/null
	run -79 --separate-stderr rlock -k lf --break --if-fence 3
	assert_regex "$stderr" "it is held by \? pid \?, token $t, fence \? \(nothing removed\)"
	run -79 --separate-stderr rlock -k lf --break --token "$t" --if-fence 3
	assert_regex "$stderr" "token $t, fence \? \(nothing removed\)"
	# a counter of another type (set by hand), the name closed by a lock-delay entry:
	# --status said "last fence 0" (only its free line told the truth)
	rcli DEL 'rlock:{lf}' >/dev/null
	rcli SADD 'rlock:{lf}:fence' stray >/dev/null
	rcli ZADD 'rlock:{lf}:delay' $(($(now_ms) + 60000)) "$t" >/dev/null
	run -75 --separate-stderr rlock -k lf --status
	assert_regex "$output" 'closed by lock-delay .*\(the fence counter holds no 64-bit integer\)'
	refute_regex "$output" 'last fence 0'
	rcli DEL 'rlock:{lf}:delay' >/dev/null
	run -0 --separate-stderr rlock -k lf --status
	assert_output 'rlock:{lf} is free (the fence counter holds no 64-bit integer)'
}

@test "--reset leaves the keys named by a request's token (:wake:, :rel:, :superseded:, of any type): no later run reads them, in any mode" {
	# documented in rlock-protocol(7): only the request of that token reads one, and
	# deleting one would take a live request's wake-up, retry answer or notice
	local t=0123456789abcdef0123456789abcdef mode
	rcli RPUSH "rlock:{pt}:wake:$t" preempted >/dev/null
	rcli SET "rlock:{pt}:rel:$t" 3 PX 60000 >/dev/null
	rcli HSET "rlock:{pt}:superseded:$t" host h pid 1 >/dev/null
	rcli SADD "rlock:{pt}:wake:${t%?}0" stray >/dev/null # another type: no WRONGTYPE
	rcli SADD "rlock:{pt}:rel:${t%?}0" stray >/dev/null
	run -0 --separate-stderr rlock -k pt --reset
	assert_regex "$stderr" 'nothing cleared'
	for mode in -x -s '-l 2' --fair --supersede --preempt; do
		# shellcheck disable=SC2086 # the mode's words
		run -0 --separate-stderr rlock -k pt $mode -w 1 -- true
	done
	key_exists "rlock:{pt}:superseded:$t"
}

@test "a stray key of another type at any key of the layout: acquires stay loud (69, naming --reset); --reset, or --break, deletes it and names it; the next acquire runs" {
	local sfx verb fence
	for verb in reset break; do
		for sfx in '' :fence :owner :holders :meta :limit :queue :qlease :qmeta :writer \
			:waiters :delay :preempt :supersede :broken :history :history:run :history:runs; do
			rcli DEL "rlock:{st}$sfx" >/dev/null # the last round's key of rlock's type
			rcli SADD "rlock:{st}$sfx" stray >/dev/null
			case $sfx in # the keys every plain acquire reads
			'' | :fence | :delay | :preempt | :queue | :holders | :writer)
				run -69 --separate-stderr rlock -k st -n -- true
				assert_regex "$stderr" 'WRONGTYPE.*rlock -k NAME --reset deletes it'
				;;
			esac
			case $sfx in # read by a shared request (a false "busy" before: :writer)
			:meta | :writer)
				run -69 --separate-stderr rlock -k st -s -n -- true
				assert_regex "$stderr" WRONGTYPE
				;;
			esac
			if [[ $sfx == :supersede ]]; then # a --fair request (a false mode error before)
				run -69 --separate-stderr rlock -k st -l 2 --fair -n -- true
				assert_regex "$stderr" WRONGTYPE
			fi
			run -0 --separate-stderr rlock -k st "--$verb"
			assert_regex "$stderr" "^rlock: $verb rlock:\{st\}: deleted rlock:\{st\}$sfx: it held a set"
			key_absent "rlock:{st}$sfx"
			run -0 rlock -k st -n -- true
			run -0 rlock -k st -s -n -- true
			run -0 rlock -k st -l 2 --fair -n -- true
		done
	done
	fence=$(rcli GET 'rlock:{st}:fence')
	run -0 --separate-stderr rlock -k st --reset # keys of rlock's own types stay
	refute_regex "$stderr" deleted
	assert_equal "$(rcli GET 'rlock:{st}:fence')" "$fence"
	rcli DEL 'rlock:{st}:fence' 'rlock:{st}:history' 'rlock:{st}:history:run' >/dev/null
}
