#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154,SC2030,SC2031  # quoted $: for the command rlock runs; bats sets $stderr; each test exports its own RLOCK_PASSWORD
# Credentials (SPEC §2, issue 3): password from the URL (warned about), --password-file
# (refused when group/other can read or write it), REDISCLI_AUTH, RLOCK_PASSWORD;
# ACL users with and without permission; NOAUTH/WRONGPASS/NOPERM → 69 with a clear
# one-line message; the password never reaches the command's environment, `ps`, or
# any output (even at -vvv).

load helpers

# Distinctive secrets, so that a grep cannot match anything else by accident. Not
# exported: they must reach rlock only where a test says so.
PW='Dflt-s3cret-Q7x9' # the default user's password (requirepass)
LPW='Lckr-s3cret-K4m2' # ACL user "locker" (least privilege)
BADPW='Wrng-s3cret-Z8p5' # a wrong password
SPW='sp@c:i/al%-s3cret-R2' # ACL user "special", URL-encoded below
SPW_ENC='sp%40c%3Ai%2Fal%25-s3cret-R2'
# The least-privilege ACL line for rlock, taken from docs/production.md's Credentials section
# itself (so that the doc and the tests cannot drift): keys and channels under the
# prefix, the commands rlock sends and those its Lua scripts call.
LOCKER_ACL=$(sed -n 's/^ *ACL SETUSER locker reset on >PASSWORD //p' \
	"${RLOCK_SOURCE_DIR:-$BATS_TEST_DIRNAME/..}/docs/production.md")

# The server requires a password: the helpers' rcli (and FLUSHALL) must send it.
rcli() { REDISCLI_AUTH=$PW redis-cli --no-auth-warning -p "$REDIS_PORT" "$@"; }

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	redis_start
	rcli CONFIG SET requirepass "$PW" >/dev/null
	# shellcheck disable=SC2086  # LOCKER_ACL is a list of ACL rules
	rcli ACL SETUSER locker reset on ">$LPW" $LOCKER_ACL >/dev/null
	# same commands, but keys and channels elsewhere
	# shellcheck disable=SC2086
	rcli ACL SETUSER nokeys reset on ">$LPW" '~other:*' '&other:*' \
		${LOCKER_ACL#'~rlock:* &rlock:* '} >/dev/null
	# keys right, but no script execution at all
	rcli ACL SETUSER noeval reset on ">$LPW" '~rlock:*' '&rlock:*' +get +set +info \
		+scan +subscribe >/dev/null
	# the lock's keys, but one command its acquire script calls (INCR) missing
	# shellcheck disable=SC2086
	rcli ACL SETUSER noincr reset on ">$LPW" ${LOCKER_ACL/+incr /} >/dev/null
	# everything but BLPOP: a waiter cannot block on its wake list
	# shellcheck disable=SC2086
	rcli ACL SETUSER noblpop reset on ">$LPW" ${LOCKER_ACL/+blpop /} >/dev/null
	# the documented ACL line before wake-one (no +zpopmin +rpush +blpop)
	local old=${LOCKER_ACL/+zpopmin /}
	old=${old/+rpush /}
	# shellcheck disable=SC2086
	rcli ACL SETUSER oldacl reset on ">$LPW" ${old/+blpop /} >/dev/null
	rcli ACL SETUSER special reset on ">$SPW" '~*' '&*' +@all >/dev/null
	export URL="redis://127.0.0.1:$REDIS_PORT"
}

setup() {
	common_setup
	umask 022
}

# no_secret TEXT...: none of the secrets (raw or URL-encoded) appears in TEXT.
no_secret() {
	local s
	for s in "$PW" "$LPW" "$BADPW" "$SPW" "$SPW_ENC"; do
		if [[ "$*" == *"$s"* ]]; then
			echo "secret '$s' leaked in:" >&2
			printf '%s\n' "$*" >&2
			return 1
		fi
	done
}

# tree_args PID...: the command lines of the PIDs and all their descendants, one a line.
tree_args() {
	local -A kids=()
	local pid ppid args todo=("$@") out=()
	while read -r pid ppid; do
		kids[$ppid]+=" $pid"
	done < <(ps -e -o pid=,ppid=)
	while ((${#todo[@]})); do
		pid=${todo[0]}
		todo=("${todo[@]:1}")
		args=$(ps -ww -o args= -p "$pid") && out+=("$args")
		# shellcheck disable=SC2206 # the pids, split on spaces
		todo+=(${kids[$pid]:-})
	done
	((${#out[@]} > 1)) || fail "tree_args found no process trees under $*"
	printf '%s\n' "${out[@]}"
}

# pwfile NAME MODE CONTENT: write a password file, return its path in $PWFILE.
pwfile() {
	PWFILE=$BATS_TEST_TMPDIR/$1
	printf '%s\n' "$3" >"$PWFILE"
	chmod "$2" "$PWFILE"
}

@test "password in the URL: works, with a warning that does not echo it" {
	run -0 --separate-stderr rlock -u "redis://:$PW@127.0.0.1:$REDIS_PORT" -k c -- echo ran
	assert_output ran
	[[ -n $stderr ]] || fail "no warning about the password on the command line"
	assert_regex "$stderr" '^rlock: '
	assert_regex "$stderr" '[Pp]assword'
	no_secret "$output" "$stderr"
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 1
	# user and password in the URL
	run -0 --separate-stderr rlock -u "redis://locker:$LPW@127.0.0.1:$REDIS_PORT" -k c -- echo ran
	assert_output ran
	assert_regex "$stderr" '[Pp]assword'
	no_secret "$output" "$stderr"
	# percent-encoded special characters
	run -0 --separate-stderr rlock -u "redis://special:$SPW_ENC@127.0.0.1:$REDIS_PORT" -k c -- echo ran
	assert_output ran
	no_secret "$output" "$stderr"
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 3
}

@test "password from the environment: no warning" {
	REDISCLI_AUTH=$PW run -0 --separate-stderr rlock -u "$URL" -k c -- echo ran
	assert_output ran
	assert_equal "$stderr" ''
	RLOCK_PASSWORD=$PW run -0 --separate-stderr rlock -u "$URL" -k c -- echo ran
	assert_output ran
	assert_equal "$stderr" ''
	RLOCK_PASSWORD=$LPW run -0 --separate-stderr rlock -u "$URL" --user locker -k c -- echo ran
	assert_equal "$stderr" ''
	REDISCLI_AUTH=$SPW run -0 --separate-stderr rlock -u "redis://special@127.0.0.1:$REDIS_PORT" -k c -- echo ran
	assert_equal "$stderr" ''
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 4
}

@test "--password-file with mode 0600 or 0400 works (trailing newline ignored)" {
	pwfile pw 600 "$PW"
	run -0 --separate-stderr rlock -u "$URL" --password-file "$PWFILE" -k c -- echo ran
	assert_output ran
	assert_equal "$stderr" ''
	pwfile pw2 400 "$LPW"
	run -0 --separate-stderr rlock -u "$URL" --user locker --password-file "$PWFILE" -k c -- echo ran
	assert_output ran
	assert_equal "$stderr" ''
	# raw special characters, no encoding needed in a file
	pwfile pw3 600 "$SPW"
	run -0 rlock -u "$URL" --user special --password-file "$PWFILE" -k c -- echo ran
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 3
}

@test "--password-file accessible by others or writable by its group: 66, nothing sent" {
	local mode
	for mode in 644 604 602 666 601; do
		pwfile "pw$mode" "$mode" "$PW"
		run -66 --separate-stderr rlock -u "$URL" --password-file "$PWFILE" -k c -- touch ran
		assert_one_line_error
		assert_regex "$stderr" "(accessible|writable) by others \(mode $mode\)"
		no_secret "$output" "$stderr"
		[[ ! -e ran ]] || fail "mode $mode: command ran"
	done
	for mode in 660 620; do
		pwfile "pw$mode" "$mode" "$PW"
		run -66 --separate-stderr rlock -u "$URL" --password-file "$PWFILE" -k c -- touch ran
		assert_one_line_error
		assert_regex "$stderr" "writable by its group \(mode $mode\)"
		[[ ! -e ran ]] || fail "mode $mode: command ran"
	done
	key_absent 'rlock:{c}:fence'
}

@test "--password-file readable by its group (0640 root:rlock): accepted (regression, issue 14.8)" {
	local mode
	for mode in 640 440; do
		pwfile "pw$mode" "$mode" "$PW"
		run -0 --separate-stderr rlock -u "$URL" --password-file "$PWFILE" -k c -- echo ran
		assert_output ran
		assert_equal "$stderr" ''
	done
}

@test "a FIFO as the password file: 66 at once, one line (regression, issue 7.9)" {
	mkfifo "$BATS_TEST_TMPDIR/pw.fifo"
	chmod 600 "$BATS_TEST_TMPDIR/pw.fifo"
	run -66 --separate-stderr timeout 10 "$RLOCK" -u "$URL" --password-file "$BATS_TEST_TMPDIR/pw.fifo" \
		-k c -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "pw\.fifo' is not a regular file"
	[[ ! -e ran ]]
}

@test "--password-file missing: 66, one line" {
	run -66 --separate-stderr rlock -u "$URL" --password-file "$BATS_TEST_TMPDIR/none" -k c -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "--password-file that is more than one line (a NUL byte, a second line, 1 MB): 64, nothing sent" {
	# The file's first line up to a NUL byte is the right password: rlock logged in
	# with it and ran, so a file that is not what its author thinks (a binary, a
	# user and a password on two lines) was never said to be wrong. A URL's %00 and
	# a config file's NUL byte are refused.
	local f=$BATS_TEST_TMPDIR/pw n
	printf '%s\0junk\n' "$PW" >"$f.nul"
	printf '%s\nsecond line\n' "$PW" >"$f.two"
	{
		printf '%s\n' "$PW"
		head -c 1048576 /dev/zero | tr '\0' x
	} >"$f.big"
	for n in nul two big; do
		chmod 600 "$f.$n"
		run -64 --separate-stderr rlock -u "$URL" --password-file "$f.$n" -k c -- touch ran
		assert_one_line_error
		assert_regex "$stderr" "password file '.*pw\.$n' must hold one line"
		no_secret "$output" "$stderr"
		[[ ! -e ran ]] || fail "$n: the command ran"
	done
	key_absent 'rlock:{c}:fence'
	# what an editor or a Windows tool writes still works: CR LF, a blank line after
	printf '%s\r\n' "$PW" >"$f.crlf"
	printf '%s\n\n' "$PW" >"$f.blank"
	printf '%s' "$PW" >"$f.bare"
	for n in crlf blank bare; do
		chmod 600 "$f.$n"
		run -0 --separate-stderr rlock -u "$URL" --password-file "$f.$n" -k c -- echo ran
		assert_output ran
	done
}

@test "redis-cli's --pass PASSWORD (and --password, --sentinel-pass): 64, the password not shown, no file read by that name" {
	# getopt_long took --pass and --password as abbreviations of --password-file: the
	# password was read as a file name and printed in "cannot read password file".
	printf '%s\n' "$BADPW" >"$PW" # a file named as the password: must not be read
	chmod 600 "$PW"
	local spelling
	for spelling in --pass --password --passw --password-fil --sentinel-pass --sentinel-password; do
		run -64 --separate-stderr rlock -u "$URL" "$spelling" "$PW" -k c -- touch ran
		assert_one_line_error
		no_secret "$output" "$stderr"
		[[ $stderr == *"$spelling"* ]] || fail "$spelling: the message does not name it: $stderr"
		run -64 --separate-stderr rlock -u "$URL" "$spelling=$PW" -k c -- touch ran
		assert_one_line_error
		no_secret "$output" "$stderr"
	done
	# redis-cli's -a PASSWORD: unknown, and not shown either
	run -64 --separate-stderr rlock -u "$URL" -a "$PW" -k c -- touch ran
	assert_one_line_error
	no_secret "$output" "$stderr"
	run -64 --separate-stderr rlock -u "$URL" "-a$PW" -k c -- touch ran
	assert_one_line_error
	no_secret "$output" "$stderr"
	[[ ! -e ran ]]
	# the full spellings still work
	pwfile pw 600 "$PW"
	run -0 --separate-stderr rlock -u "$URL" --password-file "$PWFILE" -k c -- echo ran
	assert_output ran
	run -0 --separate-stderr rlock -u "$URL" --password-file="$PWFILE" -k c -- echo ran
	assert_output ran
}

@test "redis-cli's redis://PASSWORD@HOST: rlock reads a user name there, and its warning does not show it" {
	# redis-cli -u takes the userinfo without ':' as the password; rlock (as documented)
	# as a user name, and warned "user 'PASSWORD' has no password", echoing it.
	run -69 --separate-stderr rlock -u "redis://$PW@127.0.0.1:$REDIS_PORT" -k c -- touch ran
	no_secret "$output" "$stderr"
	assert_regex "$stderr" "URL names a user but no password .*redis-cli reads it as the password.*redis://:PASSWORD@HOST"
	[[ ! -e ran ]]
	printf 'url = redis://%s@127.0.0.1:%s\n' "$PW" "$REDIS_PORT" >c.conf
	chmod 600 c.conf
	run -69 --separate-stderr rlock --config "$PWD/c.conf" -k c -- touch ran
	no_secret "$output" "$stderr"
	# (port 1: nobody listens; -n: no waiting for the sentinels)
	run -69 --separate-stderr rlock -n -u "redis-sentinel://$PW@127.0.0.1:1/m" -k c -- touch ran
	no_secret "$output" "$stderr"
	assert_regex "$stderr" "Sentinel URL names a user but no password"
	# --user NAME names a user: it is shown
	run -69 --separate-stderr rlock -u "$URL" --user locker -k c -- touch ran
	assert_regex "$stderr" "user 'locker' has no password"
}

@test "command line wins over the environment (SPEC §6 precedence)" {
	pwfile pw 600 "$PW"
	RLOCK_PASSWORD=$BADPW REDISCLI_AUTH=$BADPW run -0 --separate-stderr \
		rlock -u "$URL" --password-file "$PWFILE" -k c -- echo ran
	assert_output ran
	no_secret "$output" "$stderr"
}

@test "wrong password: 69, one clear line without the password" {
	RLOCK_PASSWORD=$BADPW run -69 --separate-stderr rlock -u "$URL" -k c -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'WRONGPASS|[Ii]nvalid.*password|wrong.*password|password.*(wrong|invalid)'
	no_secret "$output" "$stderr"
	[[ ! -e ran ]]
	# wrong password for an ACL user, from the URL
	run -69 --separate-stderr rlock -u "redis://locker:$BADPW@127.0.0.1:$REDIS_PORT" -k c -- touch ran
	assert_regex "$stderr" 'WRONGPASS|[Ii]nvalid.*password|wrong.*password|password.*(wrong|invalid)'
	no_secret "$output" "$stderr"
	# unknown user
	RLOCK_PASSWORD=$LPW run -69 --separate-stderr rlock -u "$URL" --user nosuchuser -k c -- touch ran
	assert_one_line_error
	no_secret "$output" "$stderr"
	[[ ! -e ran ]]
	key_absent 'rlock:{c}:fence'
}

@test "no password: 69, one line mentioning NOAUTH or the password" {
	run -69 --separate-stderr rlock -u "$URL" -k c -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'NOAUTH|[Pp]assword|[Aa]uthentication'
	[[ ! -e ran ]]
	run -69 --separate-stderr rlock -u "$URL" -k c --status
	assert_one_line_error
	assert_regex "$stderr" 'NOAUTH|[Pp]assword|[Aa]uthentication'
	run -69 --separate-stderr rlock -u "$URL" -k c --break
	assert_one_line_error
	assert_regex "$stderr" 'NOAUTH|[Pp]assword|[Aa]uthentication'
	run -69 --separate-stderr rlock -u "$URL" --list
	assert_one_line_error
	assert_regex "$stderr" 'NOAUTH|[Pp]assword|[Aa]uthentication'
	assert_output '' # no table header before the error
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT/2" -k c -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'NOAUTH|[Pp]assword|[Aa]uthentication'
	[[ ! -e ran ]]
}

@test "least-privilege ACL user: run, wait, status, list, break, nested, db" {
	rcli SCRIPT FLUSH >/dev/null # the first call must go through NOSCRIPT → EVAL
	export RLOCK_PASSWORD=$LPW
	run -0 --separate-stderr rlock -u "$URL" --user locker -k acl -- echo ran
	assert_output ran
	assert_equal "$stderr" ''
	# a holder and a waiter (SUBSCRIBE on the release channel)
	rlock_bg -u "$URL" --user locker -t 3s -k acl -- "$HOLD" a
	local holder=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -u "$URL" --user locker -k acl -w 20 -- "$HOLD" b
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	run -75 --separate-stderr rlock -u "$URL" --user locker -k acl --status --json
	no_secret "$output" "$stderr"
	run -0 rlock -u "$URL" --user locker --list
	assert_output --partial acl
	touch a.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	wait_until 30 test -e b.started || cat "$waiter_err"
	run -0 --separate-stderr rlock -u "$URL" --user locker -k acl --break
	touch b.release
	rlock_wait "$waiter"
	# nested re-entry (GET of the live token) does not deadlock; the inner rlock
	# needs its own password source (RLOCK_PASSWORD is removed from its environment)
	pwfile lpw 600 "$LPW"
	run -0 rlock -u "$URL" --user locker -k nest -- \
		"$RLOCK" -u "$URL" --user locker --password-file "$PWFILE" -k nest -w 5 -- echo inner
	assert_output inner
	# another database (SELECT)
	run -0 rlock -u "redis://locker@127.0.0.1:$REDIS_PORT/3" -k acl -- echo ran
	assert_equal "$(rcli -n 3 GET 'rlock:{acl}:fence')" 1
}

@test "the documented ACL user runs every verb: check, history, status, list, break, reset, modes, lock-delay, once-per, preempt, supersede, across steps" {
	[[ $LOCKER_ACL == '~rlock:* &rlock:* +'* ]] || fail "no ACL line in docs/production.md: '$LOCKER_ACL'"
	export RLOCK_PASSWORD=$LPW
	local u=(-u "$URL" --user locker) pid
	# --check: reachable, nothing unsafe (CONFIG GET may be refused: a warning)
	run --separate-stderr rlock "${u[@]}" --check
	[[ $status == 0 || $status == 1 ]] || fail "--check $status: $output $stderr"
	refute_line --regexp "^unsafe"
	assert_line --regexp '^ok +[^ ]+ reach: answers'
	assert_line --regexp '^ok +[^ ]+ acl: user .locker. has the rights rlock uses'
	rcli ACL LOG RESET >/dev/null # --check tries rights it can do without
	run -0 rlock "${u[@]}" -k v -- true
	run -0 rlock "${u[@]}" -k v --history
	assert_output --partial acquired
	run -0 rlock "${u[@]}" -k v --history --json
	run -0 rlock "${u[@]}" -k v --status
	run -0 rlock "${u[@]}" -k v --status --json
	run -0 rlock "${u[@]}" --list --json
	# every mode with a holder and a waiter (the release wakes one: ZPOPMIN, RPUSH, BLPOP)
	local mode
	for mode in -x -s '-l 1' --fair; do
		local n=m${mode//[ -]/}
		# shellcheck disable=SC2086  # $mode is one or two words
		rlock_bg "${u[@]}" $mode -k "$n" -- "$HOLD" "$n"
		pid=$RLOCK_PID
		wait_until 30 test -e "$n.started"
		run -75 rlock "${u[@]}" -k "$n" --status
		if [[ $mode == -s ]]; then # a shared holder does not make another wait
			# shellcheck disable=SC2086
			run -0 rlock "${u[@]}" $mode -k "$n" -n -- true
			touch "$n.release"
		else
			# shellcheck disable=SC2086
			rlock_bg "${u[@]}" $mode -k "$n" -w 20 -- true
			local waiter=$RLOCK_PID
			wait_until 30 eval '(($(waiters "$n") >= 1))'
			touch "$n.release"
			rlock_wait "$waiter"
			assert_equal "$RLOCK_STATUS" 0
		fi
		rlock_wait "$pid"
		assert_equal "$RLOCK_STATUS" 0
	done
	# --lock-delay: a broken holder leaves the name closed; the next waits it out
	rlock_bg "${u[@]}" -t 1s --lock-delay 1s -k ld -- "$HOLD" ld
	pid=$RLOCK_PID
	wait_until 30 test -e ld.started
	run -0 rlock "${u[@]}" -k ld --break
	rlock_wait "$pid"
	run -75 rlock "${u[@]}" -k ld -n -- true
	run -75 rlock "${u[@]}" -k ld --status
	assert_output --partial lock-delay
	run -0 rlock "${u[@]}" --lock-delay 1s -k ld -w 20 -- true
	run -0 rlock "${u[@]}" -k ld --reset
	# --once-per, --min-hold, --max-hold, several names
	run -0 rlock "${u[@]}" --once-per 1m -k op -- true
	run -75 rlock "${u[@]}" --once-per 1m -k op -- true
	run -0 --separate-stderr rlock "${u[@]}" -k op --reset
	assert_regex "$stderr" 'cleared the --once-per mark'
	run -0 rlock "${u[@]}" --min-hold 100ms --max-hold 10s -k mh -k mh2 -- true
	# --preempt a --preemptible holder
	rlock_bg "${u[@]}" --preemptible -k pe -- "$HOLD" pe
	pid=$RLOCK_PID
	wait_until 30 test -e pe.started
	run -0 rlock "${u[@]}" --preempt -w 20 -k pe -- true
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 81
	# --supersede: a newer request takes the older one's place
	rlock_bg "${u[@]}" -k su -- "$HOLD" su
	local holder=$RLOCK_PID
	wait_until 30 test -e su.started
	rlock_bg "${u[@]}" --supersede --label old -w 20 -k su -- true
	pid=$RLOCK_PID
	wait_until 30 eval '[[ $(rcli HGET "rlock:{su}:supersede" label) == old ]]'
	rlock_bg "${u[@]}" --supersede --label new -w 20 -k su -- true
	local newer=$RLOCK_PID
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 80
	touch su.release
	rlock_wait "$holder"
	rlock_wait "$newer"
	assert_equal "$RLOCK_STATUS" 0
	# across steps: --acquire, --held, --break --token, --release
	eval "$(rlock "${u[@]}" -k st --acquire)"
	[[ -n ${RLOCK_TOKEN:-} ]] || fail "--acquire printed no token"
	run -0 rlock "${u[@]}" --held
	run -0 rlock "${u[@]}" -k st --release
	eval "$(rlock "${u[@]}" -k st --acquire)"
	run -0 rlock "${u[@]}" -k st --break --token "$RLOCK_TOKEN"
	run -79 rlock "${u[@]}" -k st --release
	unset RLOCK_KEY RLOCK_TOKEN RLOCK_FENCE
	# nothing was refused on the way
	run -0 rcli ACL LOG
	refute_output --partial locker
}

@test "ACL user without access to the lock's keys: 69, NOPERM-ish message" {
	RLOCK_PASSWORD=$LPW run -69 --separate-stderr rlock -u "$URL" --user nokeys -k c -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'NOPERM|[Pp]ermission'
	no_secret "$output" "$stderr"
	[[ ! -e ran ]]
	key_absent 'rlock:{c}'
	key_absent 'rlock:{c}:fence'
	# but it works under a prefix the user may access
	RLOCK_PASSWORD=$LPW run -0 rlock -u "$URL" --user nokeys --prefix other: -k c -- echo ran
	assert_output ran
}

@test "ACL user not allowed to run scripts: 69 in every mode, one line naming the server and NOPERM" {
	local args tok=0123456789abcdef0123456789abcdef
	for args in "-k c -- touch ran" "-n -k c -- touch ran" "-k c --status" "-k c --break" \
		"-k c --history" "-k c --held --token $tok" "-k c --acquire"; do
		# shellcheck disable=SC2086 # one option a word
		RLOCK_PASSWORD=$LPW run -69 --separate-stderr rlock -u "$URL" --user noeval $args
		assert_one_line_error
		assert_regex "$stderr" "^rlock: 127\.0\.0\.1:$REDIS_PORT: [a-z]+: permission denied: NOPERM"
	done
	[[ ! -e ran ]]
}

@test "ACL user denied a command inside the script (no +incr): 69 at once, no stale lock" {
	# Redis 7 reports this as "ERR The user executing the script can't run this
	# command"; the SET before the INCR is not rolled back. rlock must fail clearly,
	# not mistake its own half-acquired key for someone else's lock and wait forever.
	local t0 ms
	t0=$(now_ms)
	RLOCK_PASSWORD=$LPW run --separate-stderr timeout 10 "$RLOCK" -u "$URL" --user noincr \
		-k c -- touch ran
	ms=$(($(now_ms) - t0))
	[[ $status != 124 ]] || fail "rlock still waiting after 10 s: $stderr"
	assert_equal "$status" 69
	assert_one_line_error
	assert_regex "$stderr" 'NOPERM|[Pp]ermission|can.t run'
	[[ ! -e ran ]]
	((ms < 5000)) || fail "took ${ms} ms"
}

@test "the password is not in the command's environment (/proc/<child>/environ)" {
	local f
	pwfile pw 600 "$PW"
	RLOCK_PASSWORD=$PW run -0 rlock -u "$URL" -k c -c "tr '\\0' '\\n' </proc/self/environ >env1"
	REDISCLI_AUTH=$PW run -0 rlock -u "$URL" -k c -c "tr '\\0' '\\n' </proc/self/environ >env2"
	RLOCK_URL="redis://:$PW@127.0.0.1:$REDIS_PORT" run -0 rlock -k c -c "tr '\\0' '\\n' </proc/self/environ >env3"
	REDIS_URL="redis://locker:$LPW@127.0.0.1:$REDIS_PORT" run -0 rlock -k c -c "tr '\\0' '\\n' </proc/self/environ >env4"
	run -0 rlock -u "redis://:$PW@127.0.0.1:$REDIS_PORT" -k c -c "tr '\\0' '\\n' </proc/self/environ >env5"
	run -0 rlock -u "$URL" --password-file "$PWFILE" -k c -c "tr '\\0' '\\n' </proc/self/environ >env6"
	RLOCK_PASSWORD=$PW REDISCLI_AUTH=$PW RLOCK_URL="redis://:$PW@127.0.0.1:$REDIS_PORT" \
		REDIS_URL="redis://:$PW@127.0.0.1:$REDIS_PORT" run -0 rlock -k c -c "tr '\\0' '\\n' </proc/self/environ >env7"
	for f in env1 env2 env3 env4 env5 env6 env7; do
		[[ -s $f ]] || fail "$f not written"
		grep -q '^RLOCK_KEY=rlock:{c}$' "$f" || fail "$f: no RLOCK_KEY"
	done
	# rlock never adds a secret: from the URL on its command line or a password file
	for f in env5 env6; do
		no_secret "$(cat "$f")" || fail "password added to the environment ($f)"
	done
	# the user's own variables pass through untouched (a nested rlock, a redis-cli in
	# the job need them): regression, issue 7.16
	grep -qx "RLOCK_PASSWORD=$PW" env1 || fail "env1: RLOCK_PASSWORD not passed through"
	grep -qx "REDISCLI_AUTH=$PW" env2 || fail "env2: REDISCLI_AUTH not passed through"
	grep -qx "RLOCK_URL=redis://:$PW@127.0.0.1:$REDIS_PORT" env3 || fail "env3: RLOCK_URL changed"
	grep -qx "REDIS_URL=redis://locker:$LPW@127.0.0.1:$REDIS_PORT" env4 || fail "env4: REDIS_URL changed"
	grep -qx "REDIS_URL=redis://:$PW@127.0.0.1:$REDIS_PORT" env7 || fail "env7: REDIS_URL changed"
}

@test "a nested rlock and a redis-cli inside the job use the exported credentials" {
	# the inner rlock authenticates with the exported variable, and the job's
	# redis-cli too (regression, issue 7.16: both were refused with NOAUTH)
	REDISCLI_AUTH=$PW run -0 rlock -u "$URL" -k outer -- "$RLOCK" -u "$URL" -k inner -- \
		redis-cli --no-auth-warning -p "$REDIS_PORT" EXISTS 'rlock:{inner}'
	assert_output 1
}

@test "the password is not in ps output while rlock runs (env and file)" {
	local pid f args
	pwfile pw 600 "$PW"
	RLOCK_PASSWORD=$PW rlock_bg -u "$URL" -k p1 -- "$HOLD" a
	local p1=$RLOCK_PID
	rlock_bg -u "$URL" --password-file "$PWFILE" -k p2 -- "$HOLD" b
	local p2=$RLOCK_PID
	RLOCK_URL="redis://:$PW@127.0.0.1:$REDIS_PORT" rlock_bg -k p3 -- "$HOLD" c
	local p3=$RLOCK_PID
	wait_until 30 test -e a.started
	wait_until 30 test -e b.started
	wait_until 30 test -e c.started
	for pid in "$p1" "$p2" "$p3"; do
		args=$(ps -ww -o args= -p "$pid")
		[[ $args == *rlock* ]] || fail "ps did not show rlock ($pid): $args"
		no_secret "$args" || fail "password in ps args of rlock"
		no_secret "$(tr '\0' ' ' <"/proc/$pid/cmdline")" || fail "password in cmdline"
	done
	# nor anywhere in their process trees (the watchdog, the command, its shell...):
	# this test's, not the whole table's (another test of the machine may put a
	# password on a command line of its own on purpose)
	no_secret "$(tree_args "$p1" "$p2" "$p3")" || fail "password in a process of the runs"
	touch a.release b.release c.release
	for pid in "$p1" "$p2" "$p3"; do
		rlock_wait "$pid"
		assert_equal "$RLOCK_STATUS" 0
	done
}

@test "the password never appears in any output at -vvv, success or failure" {
	local src ok pw args=() envs=()
	pwfile good 600 "$PW"
	pwfile bad 600 "$BADPW"
	for ok in 1 0; do
		[[ $ok == 1 ]] && pw=$PW || pw=$BADPW
		for src in url env-rlock env-cli file url-env; do
			args=(-u "$URL") envs=()
			case $src in
			url) args=(-u "redis://:$pw@127.0.0.1:$REDIS_PORT") ;;
			env-rlock) envs=(RLOCK_PASSWORD="$pw") ;;
			env-cli) envs=(REDISCLI_AUTH="$pw") ;;
			file) args+=(--password-file "$([[ $ok == 1 ]] && echo good || echo bad)") ;;
			url-env) args=() envs=(RLOCK_URL="redis://:$pw@127.0.0.1:$REDIS_PORT") ;;
			esac
			run --separate-stderr env "${envs[@]}" "$RLOCK" -vvv "${args[@]}" -k v -- echo ran
			if [[ $ok == 1 ]]; then
				[[ $status == 0 ]] || fail "$src: status $status: $stderr"
			else
				[[ $status == 69 ]] || fail "$src (wrong password): status $status: $stderr"
			fi
			no_secret "$output" "$stderr" || fail "leak with $src (ok=$ok)"
			for op in --status --list --break; do
				run --separate-stderr env "${envs[@]}" "$RLOCK" -vvv "${args[@]}" -k v $op
				no_secret "$output" "$stderr" || fail "leak with $src $op (ok=$ok)"
			done
		done
	done
}

@test "--status / --list of a lock taken with a password in the URL show no password" {
	rlock_bg -vvv -u "redis://:$PW@127.0.0.1:$REDIS_PORT" -k st -- "$HOLD" a
	local holder=$RLOCK_PID holder_err=$RLOCK_ERR
	wait_until 30 test -e a.started
	RLOCK_PASSWORD=$PW run -75 --separate-stderr rlock -u "$URL" -k st --status
	no_secret "$output" "$stderr"
	RLOCK_PASSWORD=$PW run -75 --separate-stderr rlock -u "$URL" -k st --status --json
	no_secret "$output" "$stderr"
	RLOCK_PASSWORD=$PW run -0 --separate-stderr rlock -u "$URL" --list --json
	no_secret "$output" "$stderr"
	no_secret "$(rcli HGETALL 'rlock:{st}:owner')" || fail "password stored in the owner hash"
	touch a.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	no_secret "$(cat "$holder_err")" || fail "password in the holder's -vvv log"
}

# renewed_once: two scripts ran since CONFIG RESETSTAT (the acquire and a renewal)
renewed_once() {
	local n
	n=$(rcli INFO commandstats | tr -d '\r' |
		awk -F'[:=,]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}')
	((${n:-0} >= 2))
}

@test "the password is wiped from rlock's memory after AUTH (file source)" {
	# Read the running rlock's writable mappings (same user; needs ptrace access).
	pwfile pw 600 "$PW"
	rcli CONFIG RESETSTAT >/dev/null
	# (3 s: a renewal after 1 s, and a lease that outlives the memory scan below on a
	# slow pass, which competes with rlock for the CPU)
	rlock_bg -u "$URL" --password-file "$PWFILE" -t 3s -k mem -- "$HOLD" a
	local pid=$RLOCK_PID
	wait_until 30 test -e a.started
	# the renewal thread has authenticated on its own connection and renewed once
	wait_until 20 renewed_once
	run perl -e '
		my ($pid, $needle) = @ARGV;
		open my $maps, "<", "/proc/$pid/maps" or exit 3;
		open my $mem, "<:raw", "/proc/$pid/mem" or exit 3;
		my $found = 0;
		while (<$maps>) {
			my ($lo, $hi, $perm, $path) = /^(\w+)-(\w+) (\S+) \S+ \S+ \S+\s*(.*)$/ or next;
			next unless $perm =~ /^rw/;
			next if $path =~ /^\[(vvar|vsyscall)/;
			my ($a, $b) = (hex $lo, hex $hi);
			# Sanitizer builds reserve terabyte-sized shadow regions: not data.
			next if $b - $a > (1 << 30);
			# Read in chunks that overlap by the needle length.
			my $step = 1 << 24;
			for (my $at = $a; $at < $b; $at += $step) {
				my $len = $b - $at < $step + length($needle) ? $b - $at : $step + length($needle);
				sysseek($mem, $at, 0) or last;
				my $buf = ""; defined(sysread($mem, $buf, $len)) or last;
				if (index($buf, $needle) >= 0) { print "found in $_"; $found = 1; last }
			}
		}
		exit $found;' "$pid" "$PW"
	touch a.release
	if [[ $status == 3 ]]; then
		rlock_wait "$pid"
		ci_skip "cannot read /proc/$pid/mem here"
	fi
	[[ $status == 0 ]] || fail "password still in memory: $output"
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "a URL password with a raw '/' and '@' is scrubbed from /proc/PID/cmdline (regression, issue 7.13)" {
	local pid args raw='sp@c:i/al%25-s3cret-R2'
	rlock_bg -u "redis://special:$raw@127.0.0.1:$REDIS_PORT" -k sc -- "$HOLD" sc
	pid=$RLOCK_PID
	wait_until 30 test -e sc.started || fail "$(cat "$RLOCK_ERR")"
	args=$(tr '\0' ' ' <"/proc/$pid/cmdline")
	[[ $args != *s3cret* && $args != *'i/al'* ]] || fail "password in cmdline: $args"
	[[ $args == *"redis://special:"*"@127.0.0.1:$REDIS_PORT "* ]] || fail "URL mangled: $args"
	touch sc.release
	rlock_wait "$pid"
	assert_equal "$RLOCK_STATUS" 0
}

@test "AUTH to a server without a password: 64 (a configuration that does not fit the server), one line naming it, for one server and Redlock nodes" {
	# redis-cli warns and goes on; rlock was given a password, so the server it meant
	# is protected: an unprotected one on that address is not it. No wait fixes that.
	local urls=()
	while ((${#urls[@]} < 3)); do
		redis_start
		urls+=("redis://127.0.0.1:$REDIS_PORT")
	done
	RLOCK_PASSWORD=whatever run -64 --separate-stderr rlock -u "${urls[2]}" -w 10 -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: 127\.0\.0\.1:$REDIS_PORT has no password set, yet rlock was given one \(password from RLOCK_PASSWORD\)"
	[[ $stderr != *whatever* ]]
	RLOCK_PASSWORD=whatever run -64 --separate-stderr rlock -u "${urls[2]}" -k a --status
	assert_one_line_error
	RLOCK_PASSWORD=whatever run -64 --separate-stderr rlock -u "${urls[0]},${urls[1]},${urls[2]}" -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'has no password set, yet rlock was given one'
	[[ ! -e ran ]]
}

@test "a server whose error after AUTH quotes the password (AUTH renamed away): no part of it is passed on" {
	redis_start --rename-command AUTH ''
	# Redis quotes an unknown command's arguments, cut to 128 bytes: a long password
	# comes back in part, which the whole-password check did not catch.
	local long
	long=Lng-s3cret-$(printf 'k%.0s' {1..120})-T41L
	RLOCK_PASSWORD=$long run -69 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'authentication to 127\.0\.0\.1:[0-9]+ failed: server refused AUTH'
	[[ $stderr != *Lng-s3cret* && $stderr != *kkkk* ]] || fail "part of the password in: $stderr"
	RLOCK_PASSWORD=$PW run -69 --separate-stderr rlock --user locker -u "redis://127.0.0.1:$REDIS_PORT" -k a -- touch ran
	assert_one_line_error
	[[ $stderr != *s3cret* ]] || fail "part of the password in: $stderr"
	[[ ! -e ran ]]
	redis_stop "$REDIS_PID"
}

@test "EVALSHA, or a command a script calls, renamed away (rename-command): 69 at once, one line naming the server and what it does not know" {
	redis_start --rename-command EVALSHA ''
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" -w 10 -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: 127\.0\.0\.1:$REDIS_PORT: acquire: the server does not know EVALSHA, which rlock needs \(renamed or disabled with rename-command\?\)\$"
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" -k a --status
	assert_regex "$stderr" "^rlock: 127\.0\.0\.1:$REDIS_PORT: status: the server does not know EVALSHA"
	redis_stop "$REDIS_PID"
	redis_start --rename-command INCR ''
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" -w 10 -k a -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: 127\.0\.0\.1:$REDIS_PORT: acquire: the server does not know a command rlock's script calls \(renamed or disabled with rename-command\?\): ERR Unknown (Redis )?command called from script\$"
	[[ ! -e ran ]]
	redis_stop "$REDIS_PID"
}

# evalsha_calls_over N: the server has run more than N EVALSHAs since CONFIG RESETSTAT.
evalsha_calls_over() {
	local n
	n=$(rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_evalsha" { print $3 }')
	((${n:-0} > $1))
}

# noblpop_waiter NAME RLOCK-ARGS...: a waiter as an ACL user without +blpop is woken on the
# release channel, without spinning, and keeps no place among the waiters.
noblpop_waiter() {
	local nb=$1
	shift
	pwfile lpw 600 "$LPW"
	rlock_bg -u "$URL" --user locker --password-file "$PWFILE" -t 60s "$@" -k "$nb" -- "$HOLD" a
	local holder=$RLOCK_PID
	wait_until 30 test -e a.started
	rlock_bg -vv -u "$URL" --user noblpop --password-file "$PWFILE" "$@" -k "$nb" -w 60s -- true
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	# settled: refused BLPOP, subscribed, and busy on the attempt after it (a release
	# before that attempt hands over the lock without a wake-up)
	wait_until 30 grep -q 'listening for the release (the release channel)' "$waiter_err"
	assert_equal "$(rcli PUBSUB NUMSUB "rlock:{$nb}:released" | sed -n 2p)" 1
	# no place: it would take a release's wake-up (wake_one.lua) from waiters that block
	assert_equal "$(rcli EXISTS "rlock:{$nb}:waiters")" 0
	rcli CONFIG RESETSTAT >/dev/null
	local t0
	t0=$(now_ms)
	# the waiter sleeps now; a spinning one would send scripts all the time
	while (($(now_ms) - t0 < 1000)); do sleep 0.1; done
	local calls
	calls=$(rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' '$1 == "cmdstat_evalsha" { print $3 }')
	echo "# scripts sent by the waiter in 1 s of waiting: ${calls:-0}" >&3
	# a waiter on the channel backs off from 200 ms (a few attempts); one that spins
	# sends hundreds
	((${calls:-0} <= 10)) || fail "the waiter spins: ${calls} scripts in 1 s"
	# released just after one of its tries: its next is 400 ms or more away, so the
	# notification, not a try of its own, is what hands it the lock (a release that
	# met a try took the lock without a wake-up on a loaded single core)
	wait_until 10 evalsha_calls_over "${calls:-0}"
	touch a.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	grep -q 'woken by the release' "$waiter_err" || fail "$(cat "$waiter_err")"
	grep -q 'NOPERM' "$waiter_err" || fail "no word of the refused BLPOP: $(cat "$waiter_err")"
}

@test "an ACL without +blpop: the waiter is woken on the release channel, without spinning" {
	noblpop_waiter nb
}

@test "an ACL without +blpop, --limit: the waiter keeps no place, is woken on the release channel, without spinning" {
	noblpop_waiter nbl -l 1
}

@test "the ACL line of earlier releases (no +zpopmin +rpush +blpop): releases work, waiters are woken" {
	pwfile lpw 600 "$LPW"
	local auth=(-u "$URL" --user oldacl --password-file "$PWFILE")
	rlock_bg "${auth[@]}" -t 60s -k old -- "$HOLD" a
	local holder=$RLOCK_PID holder_err=$RLOCK_ERR
	wait_until 30 test -e a.started
	rlock_bg -vv "${auth[@]}" -k old -w 60s -- touch waiter-ran
	local waiter=$RLOCK_PID waiter_err=$RLOCK_ERR
	# settled: refused BLPOP, subscribed, and busy on the attempt after it (a release
	# before that attempt hands over the lock without a wake-up)
	wait_until 30 grep -q 'listening for the release (the release channel)' "$waiter_err"
	assert_equal "$(rcli PUBSUB NUMSUB "rlock:{old}:released" | sed -n 2p)" 1
	# the place the first attempt took is left: it would swallow a release's wake-up
	assert_equal "$(rcli ZCARD 'rlock:{old}:waiters')" 0
	touch a.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	[[ ! -s $holder_err ]] || fail "holder: $(cat "$holder_err")"
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	[[ -e waiter-ran ]]
	grep -q 'woken by the release' "$waiter_err" || fail "$(cat "$waiter_err")"
	assert_equal "$(rcli EXISTS 'rlock:{old}')" 0
}

# creddir: a systemd-style credentials directory (LoadCredential=: files 0400 in a
# 0500 directory) holding rlock-password (the servers' password) and other, a wrong one.
creddir() {
	CREDS=$BATS_TEST_TMPDIR/creds
	mkdir -p "$CREDS"
	printf '%s\n' "$PW" >"$CREDS/rlock-password"
	printf '%s\n' "$LPW" >"$CREDS/locker"
	printf '%s\n' "$BADPW" >"$CREDS/other"
	chmod 400 "$CREDS"/*
	chmod 500 "$CREDS"
}

@test "a relative \$CREDENTIALS_DIRECTORY is refused (64, one line), for cred:NAME and for rlock-password: it would name another directory in each one a command changes to" {
	creddir
	cd "$CREDS/.."
	local rel=${CREDS##*/}
	CREDENTIALS_DIRECTORY=$rel run -64 --separate-stderr rlock -u "$URL" -k c -- true
	assert_equal "$stderr" "rlock: CREDENTIALS_DIRECTORY: '$rel' is not an absolute path (systemd sets an absolute one) (try 'rlock --help')"
	CREDENTIALS_DIRECTORY=$rel run -64 --separate-stderr rlock -u "$URL" --password-file cred:locker -k c -- true
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"CREDENTIALS_DIRECTORY: '$rel' is not an absolute path"* ]] || fail "$stderr"
	# a password given otherwise: the variable is not read
	CREDENTIALS_DIRECTORY=$rel run -0 rlock -u "$URL" --password-file "$CREDS/rlock-password" -k c -- true
}

@test "systemd credential: \$CREDENTIALS_DIRECTORY/rlock-password when nothing else gives a password; -v names it; not in the command's environment" {
	creddir
	CREDENTIALS_DIRECTORY=$CREDS run -0 --separate-stderr rlock -v -u "$URL" -k c \
		-c "tr '\\0' '\\n' </proc/self/environ >env1"
	assert_regex "$stderr" "password from \\\$CREDENTIALS_DIRECTORY/rlock-password"
	no_secret "$stderr" "$(cat env1)" || fail "the credential leaked"
	grep -qx "CREDENTIALS_DIRECTORY=$CREDS" env1 || fail "the user's environment was changed"
	# quiet without -v
	CREDENTIALS_DIRECTORY=$CREDS run -0 --separate-stderr rlock -u "$URL" -k c -- true
	assert_equal "$stderr" ''
	# without the variable (or the file), no password: NOAUTH
	run -69 --separate-stderr rlock -u "$URL" -k c -- true
	mkdir -p "$BATS_TEST_TMPDIR/empty"
	CREDENTIALS_DIRECTORY=$BATS_TEST_TMPDIR/empty run -69 --separate-stderr rlock -u "$URL" -k c -- true
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 2
}

@test "systemd credential: any other password source wins over it" {
	creddir
	chmod 700 "$CREDS" && printf '%s\n' "$BADPW" >"$CREDS/rlock-password.new" &&
		chmod 400 "$CREDS/rlock-password.new" && mv -f "$CREDS/rlock-password.new" "$CREDS/rlock-password"
	# a wrong credential is never used when the environment, a file, the config or the
	# URL gives the password
	pwfile pw 600 "$PW"
	CREDENTIALS_DIRECTORY=$CREDS RLOCK_PASSWORD=$PW run -0 --separate-stderr rlock -v -u "$URL" -k c -- true
	assert_regex "$stderr" 'password from RLOCK_PASSWORD'
	CREDENTIALS_DIRECTORY=$CREDS run -0 rlock -u "$URL" --password-file "$PWFILE" -k c -- true
	CREDENTIALS_DIRECTORY=$CREDS run -0 rlock -u "redis://:$PW@127.0.0.1:$REDIS_PORT" -k c -- true
	CREDENTIALS_DIRECTORY=$CREDS run -69 rlock -u "$URL" -k c -- true
}

@test "password-file = cred:NAME reads \$CREDENTIALS_DIRECTORY/NAME (config file and command line)" {
	creddir
	printf 'url = %s\nuser = locker\npassword-file = cred:locker\n' "$URL" >cfg
	CREDENTIALS_DIRECTORY=$CREDS run -0 --separate-stderr rlock -v --config cfg -k c -- true
	assert_regex "$stderr" "password from .*\\(systemd credential $CREDS/locker\\)"
	no_secret "$stderr"
	CREDENTIALS_DIRECTORY=$CREDS run -69 rlock -u "$URL" --password-file cred:other -k c -- true
	CREDENTIALS_DIRECTORY=$CREDS run -0 rlock -u "$URL" --password-file cred:rlock-password -k c -- true
	# no $CREDENTIALS_DIRECTORY, a name that is a path: 64, one line; a missing credential: 66
	run -64 --separate-stderr rlock --config cfg -k c -- true
	assert_one_line_error
	assert_regex "$stderr" 'CREDENTIALS_DIRECTORY'
	local bad
	for bad in cred:../creds/locker cred: cred:..; do
		CREDENTIALS_DIRECTORY=$CREDS run -64 --separate-stderr rlock -u "$URL" --password-file "$bad" -k c -- true
		assert_one_line_error
	done
	CREDENTIALS_DIRECTORY=$CREDS run -66 --separate-stderr rlock -u "$URL" --password-file cred:missing -k c -- true
	assert_one_line_error
	assert_equal "$(rcli GET 'rlock:{c}:fence')" 2
}

@test "the systemd unit of docs/recipes.md: systemd-analyze verify is clean; its Exec lines take the lock with the credential and give it back" {
	require_tool systemd-analyze
	local unit line
	unit=$(awk '/^<!-- recipe:systemd-lock-unit/ { f = 1; next } f && /^```/ { if (f == 2) exit; f = 2; next } f == 2 { print }' \
		"$RLOCK_SOURCE_DIR/docs/recipes.md")
	[[ $unit == *KillMode=mixed* && $unit == *LoadCredential=rlock-password* ]] || fail "no unit in docs/recipes.md"
	printf '%s\n' "$unit" >reindex.service
	run -0 systemd-analyze verify "$PWD/reindex.service"
	assert_output ''
	# run its Exec lines as systemd would: $$ is $, the credential in its directory
	creddir
	mkdir -p run bin
	printf '#!/bin/sh\necho "fence=$RLOCK_FENCE" >job.out\n' >bin/reindex
	chmod +x bin/reindex
	exec_line() {
		line=$(printf '%s\n' "$unit" | sed -n "s/^$1=//p")
		line=${line//\$\$/\$}
		line=${line//exec rlock /exec $RLOCK }
		line=${line//\/usr\/local\/bin\/reindex/$PWD/bin/reindex}
		CREDENTIALS_DIRECTORY=$CREDS RUNTIME_DIRECTORY=$PWD/run RLOCK_URL=$URL eval "$line"
	}
	exec_line ExecStartPre
	grep -q "^RLOCK_TOKEN=" run/rlock.env || fail "no token in rlock.env"
	key_exists 'rlock:{reindex}'
	track_pid "$(rcli HGET 'rlock:{reindex}:owner' pid)" # the keeper, should the test fail
	exec_line ExecStart
	grep -qx 'fence=1' job.out || fail "the job did not run under the lock"
	exec_line ExecStopPost
	key_absent 'rlock:{reindex}' || fail "the lock was not released"
}
