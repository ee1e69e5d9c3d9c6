#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# docs/production.md, followed as written: a TLS redis-server with certificates made
# by the test, the page's ACL line, its config file and its crontab line under cron's
# bare environment (env -i), the password sources, and the TLS failures it promises
# (wrong CA, wrong name, expired, plaintext/TLS mismatch, TLS < 1.2: exit 69).
#
# The page's config block, crontab line and ACL line are extracted from it, so
# the test breaks if the documentation drifts from what works.

# shellcheck disable=SC2030,SC2031  # each @test runs in its own subshell: exports are per test
load helpers

PRODUCTION=$RLOCK_SOURCE_DIR/docs/production.md

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	# a plaintext server (for TLS-to-plaintext), then an expired-certificate one, a
	# client-certificate one, and the main TLS server with the page's ACL user
	redis_start
	export PLAIN_PORT=$REDIS_PORT
	tls_redis_start --cert "$TLS_CERTS/expired.pem"
	export EXPIRED_PORT=$TLS_PORT
	tls_redis_start --tls-auth-clients yes
	export CLIENTAUTH_PORT=$TLS_PORT
	tls_redis_start
	export PORT=$TLS_PORT
	local acl
	acl=$(readme_acl) || return 1
	# shellcheck disable=SC2086  # the ACL line is split into words, as redis-cli does
	tls_cli "$PORT" ${acl//>PASSWORD/>locker-pw} | grep -qx OK || {
		echo "the page's ACL line failed: $acl" >&2
		return 1
	}
}

setup() {
	kill_tracked
	tls_cli "$PORT" FLUSHALL >/dev/null
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$HOME"
	unset REDIS_URL
}

teardown() { common_teardown; }

# tcli ARGS: redis-cli on the main TLS server (as the unrestricted default user).
tcli() { (unset REDISCLI_AUTH && tls_cli "$PORT" "$@"); }

# ---------------------------------------------------------------------------------
# what docs/production.md says, extracted

# _production: docs/production.md (it was the README's "## Production" section).
_production() {
	[[ -s $PRODUCTION ]] || echo "no $PRODUCTION" >&2
	cat "$PRODUCTION"
}

# readme_block MARKER: the fenced block that follows the HTML comment containing MARKER.
readme_block() {
	_production | awk -v m="$1" '
		index($0, "<!--") && index($0, m) {want = 1; next}
		want && /^```/ {if (inb) exit; inb = 1; next}
		inb {print}'
}

# readme_acl: the ACL SETUSER line (without "ACL" is not enough: keep it whole).
readme_acl() {
	local line
	line=$(_production | sed -n 's/^ *\(ACL SETUSER .*\)$/\1/p' | head -1)
	[[ -n $line ]] || {
		echo "no 'ACL SETUSER' line in docs/production.md" >&2
		return 1
	}
	echo "$line"
}

# readme_config: the page's config file with the server, password file and CA
# replaced by this test's. Fails if a placeholder is left.
readme_config() {
	local c
	c=$(readme_block 'runs this file') || return 1
	[[ -n $c ]] || {
		echo "no config block in docs/production.md" >&2
		return 1
	}
	c=${c//rediss:\/\/redis.example.com:6380/rediss://localhost:$PORT}
	c=${c//\/home\/backup\/.config\/rlock\/password/$HOME/.config/rlock/password}
	c=${c//\/etc\/rlock\/redis-ca.pem/$TLS_CERTS/ca.pem}
	if [[ $c == *example.com* || $c == */home/backup* || $c == */etc/rlock/* ]]; then
		echo "docs/production.md config has an unreplaced placeholder: $c" >&2
		return 1
	fi
	echo "$c"
}

# readme_cron_command: the command part of the page's crontab line (after the five
# schedule fields), with the job replaced by $1.
readme_cron_command() {
	local line cmd
	line=$(readme_block 'runs this line' | grep -v '^#' | head -1)
	[[ -n $line ]] || {
		echo "no crontab line in docs/production.md" >&2
		return 1
	}
	cmd=$(awk '{for (i = 6; i <= NF; i++) printf "%s%s", $i, (i < NF ? " " : "\n")}' <<<"$line")
	[[ $cmd == rlock\ * && $cmd == */usr/local/bin/backup.sh* ]] || {
		echo "unexpected crontab line: $line" >&2
		return 1
	}
	echo "${cmd//\/usr\/local\/bin\/backup.sh/$1}"
}

# install_readme_config: do what docs/production.md says: directory 700, password file, both
# chmod 600, the config file in ~/.config/rlock/config.
install_readme_config() {
	install -d -m 700 "$HOME/.config/rlock"
	printf '%s\n' 'locker-pw' >"$HOME/.config/rlock/password"
	readme_config >"$HOME/.config/rlock/config" || return 1
	chmod 600 "$HOME/.config/rlock/password" "$HOME/.config/rlock/config"
}

# cron ARGS...: run a shell command line the way cron does: a bare environment with
# HOME, LOGNAME, SHELL and PATH (where rlock is installed), through /bin/sh -c.
cron() {
	env -i HOME="$HOME" LOGNAME="$(id -un)" SHELL=/bin/sh \
		PATH="$(dirname "$RLOCK"):/usr/bin:/bin" /bin/sh -c "$*"
}

# make_job: $BATS_TEST_TMPDIR/backup.sh appends one line per run to runs.
make_job() {
	JOB=$BATS_TEST_TMPDIR/backup.sh
	printf '#!/bin/sh\necho "run by $RLOCK_KEY fence $RLOCK_FENCE" >>%s/runs\n' "$BATS_TEST_TMPDIR" >"$JOB"
	chmod +x "$JOB"
}

# ---------------------------------------------------------------------------------
# the page's cron setup, literally

@test "production.md: the config file, as written, reaches the TLS server under cron's env -i" {
	install_readme_config
	run -0 --separate-stderr cron "rlock -k nightly -c 'echo key=\$RLOCK_KEY fence=\$RLOCK_FENCE'"
	assert_output 'key=rlock:{nightly} fence=1'
	assert_equal "$stderr" "" # nothing for cron to mail
	# it went through the TLS server, as the ACL user
	assert_equal "$(tcli GET 'rlock:{nightly}:fence')" 1
}

@test "production.md: the crontab line on two hosts runs the job once, silently" {
	install_readme_config
	make_job
	local cmd
	cmd=$(readme_cron_command "$JOB")
	# host A fires, runs the short job
	run -0 --separate-stderr cron "$cmd"
	assert_equal "$stderr" ""
	assert_equal "$output" ""
	assert_equal "$(wc -l <runs)" 1
	# host B fires a little later (clock skew): skipped, exit 0, no output for cron to mail
	run -0 --separate-stderr cron "$cmd"
	assert_equal "$stderr" ""
	assert_equal "$output" ""
	assert_equal "$(wc -l <runs)" 1
	# --min-hold 10m: the lock stays until 10 minutes after the start, then expires
	local pttl
	pttl=$(tcli PTTL 'rlock:{nightly-backup}')
	((pttl > 9 * 60000 && pttl <= 10 * 60000)) || fail "pttl $pttl is not about 10 minutes"
	run -75 cron "rlock -k nightly-backup --status"
	assert_line --regexp "^ +command +$JOB\$"
	# and when the window is over (here: the operator breaks it), the job runs again
	run -0 cron "rlock -k nightly-backup --break"
	run -0 cron "$cmd"
	assert_equal "$(wc -l <runs)" 2
	assert_equal "$(tail -1 runs)" 'run by rlock:{nightly-backup} fence 2'
}

@test "production.md: the crontab line's job, when it outlasts --min-hold, releases at its end" {
	install_readme_config
	make_job
	local cmd
	cmd=$(readme_cron_command "$JOB")
	cmd=${cmd/--min-hold 10m/--min-hold 100ms}
	printf '#!/bin/sh\nsleep 0.3\necho ran >>%s/runs\n' "$BATS_TEST_TMPDIR" >"$JOB"
	run -0 cron "$cmd"
	[[ $(tcli EXISTS 'rlock:{nightly-backup}') == 0 ]]
	run -0 cron "$cmd"
	assert_equal "$(wc -l <runs)" 2
}

@test "production.md: the operator commands work with the same config (--status, --json, --list, --break)" {
	install_readme_config
	cron "rlock -k nightly-backup -- $HOLD h" >/dev/null 2>&1 &
	track_pid $!
	wait_until 30 test -e h.started
	track_pidfile h.pid
	run -75 cron "rlock -k nightly-backup --status"
	assert_line --index 0 'rlock:{nightly-backup} is held'
	assert_line --regexp '^ +ttl left +[0-9]{2}s$' # ttl = 1m from the config (one family: 59s, not 0m59s)
	run -0 cron "rlock -k nightly-backup --status --json | jq -r '.host, .ttl_left_ms'"
	assert_equal "${lines[0]}" "$(hostname)"
	assert_regex "${lines[1]}" '^[0-9]+$'
	run -75 --separate-stderr cron "rlock -k nightly-backup --status --json"
	assert_equal "$(jq -r .host <<<"$output")" "$(hostname)"
	jq -e '.ttl_left_ms > 0 and .ttl_ms == 60000' <<<"$output" >/dev/null
	run -0 cron "rlock --list"
	assert_regex "${lines[0]}" '^NAME +HOST +PID +HELD +TTL +RENEWED +COMMAND$'
	assert_line --regexp "^nightly-backup +$(hostname) +[0-9]+ "
	run -0 cron "rlock --list --json"
	assert_equal "$(jq -r '.prefix, .locks[0].name' <<<"$output" | tr '\n' ' ')" 'rlock: nightly-backup '
	run -0 --separate-stderr cron "rlock -k nightly-backup --break"
	assert_regex "$stderr" "^rlock: broke rlock:\{nightly-backup\}: token [0-9a-f]+, held by $(hostname) pid [0-9]+ \($HOLD h\), fence 1$"
	run -0 --separate-stderr cron "rlock -k nightly-backup --break"
	assert_regex "$stderr" 'not held'
}

@test "production.md: the password file must be private (chmod 600), else 66" {
	install_readme_config
	chmod 644 "$HOME/.config/rlock/password"
	run -66 --separate-stderr cron "rlock -k nightly -- touch $BATS_TEST_TMPDIR/ran"
	assert_regex "$stderr" 'password'
	[[ $stderr != *locker-pw* ]]
	[[ ! -e ran ]]
}

@test "production.md: a config holding 'password =' must not be accessible by others" {
	install_readme_config
	sed -i '/^password-file/d' "$HOME/.config/rlock/config"
	echo 'password = locker-pw' >>"$HOME/.config/rlock/config"
	run -0 cron "rlock -k nightly -- true"
	# readable by its group is fine (a shared /etc/rlock.conf); by others it is not
	chmod 640 "$HOME/.config/rlock/config"
	run -0 cron "rlock -k nightly -- true"
	chmod 604 "$HOME/.config/rlock/config"
	run -66 --separate-stderr cron "rlock -k nightly -- touch $BATS_TEST_TMPDIR/ran"
	[[ $stderr != *locker-pw* ]]
	[[ ! -e ran ]]
}

# ---------------------------------------------------------------------------------
# ACL user

@test "production.md ACL line: the user can lock, wait and be woken, --status, --list, --break" {
	export REDISCLI_AUTH=locker-pw
	local url=rediss://locker@localhost:$PORT
	local tls=(--cacert "$TLS_CERTS/ca.pem")
	rlock_bg -u "$url" "${tls[@]}" -k acl -- "$HOLD" h
	local holder=$RLOCK_PID
	wait_until 30 test -e h.started
	run -75 rlock -u "$url" "${tls[@]}" -n -k acl -- true
	run -75 rlock -u "$url" "${tls[@]}" -k acl --status
	run -0 rlock -u "$url" "${tls[@]}" --list --json
	assert_equal "$(jq -r '.locks[0].name' <<<"$output")" acl
	# a waiter takes a place among the waiters and is woken by the release
	rlock_bg -u "$url" "${tls[@]}" -k acl -- touch got
	local waiter=$RLOCK_PID
	wait_until 30 eval '[[ $(waiters acl tcli) -ge 1 ]]'
	touch h.release
	rlock_wait "$holder"
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$waiter"
	assert_equal "$RLOCK_STATUS" 0
	[[ -e got ]]
	# --min-hold (PEXPIRE at release) and --break
	run -0 rlock -u "$url" "${tls[@]}" --min-hold 30s -k acl -- true
	run -0 --separate-stderr rlock -u "$url" "${tls[@]}" -k acl --break
	assert_regex "$stderr" 'broke rlock:\{acl\}'
	# no warning about the eviction policy (INFO is allowed; the server is noeviction);
	# -v looks at it at once (else at the first renewal)
	run -0 --separate-stderr rlock -v -u "$url" "${tls[@]}" -k acl -- true
	[[ $stderr != *maxmemory-policy* && $stderr != *eviction* ]] || fail "$stderr"
}

@test "ACL user outside its key pattern: NOPERM, 69, command not run" {
	export REDISCLI_AUTH=locker-pw
	run -69 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" --cacert "$TLS_CERTS/ca.pem" \
		--prefix other: -k x -- touch ran
	assert_regex "$stderr" 'NOPERM'
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "ACL: a database other than 0 needs +select; --wait-replicas needs +wait" {
	export REDISCLI_AUTH=locker-pw
	local tls=(--cacert "$TLS_CERTS/ca.pem") acl
	# The page's user (with +select) works on database 1 ...
	run -0 rlock -u "rediss://locker@localhost:$PORT/1" "${tls[@]}" -k x -- touch ran
	[[ -e ran ]]
	rm -f ran
	assert_equal "$(tcli -n 1 GET 'rlock:{x}:fence')" 1
	# ... and the same line without +select does not: it is needed.
	acl=$(readme_acl)
	[[ $acl == *" +select"* ]] || fail "production.md's ACL line lacks +select"
	acl=${acl/SETUSER locker /SETUSER nosel }
	acl=${acl/ +select/}
	# shellcheck disable=SC2086
	tcli ${acl//>PASSWORD/>locker-pw} | grep -qx OK
	run -69 --separate-stderr rlock -u "rediss://nosel@localhost:$PORT/1" "${tls[@]}" -k x -- touch ran
	assert_regex "$stderr" "NOPERM.*'select'"
	[[ ! -e ran ]]
	# --wait-replicas needs +wait, which the page's line has for it: without it, NOPERM.
	acl=$(readme_acl)
	[[ $acl == *" +wait"* ]] || fail "production.md's ACL line lacks +wait"
	acl=${acl/SETUSER locker /SETUSER nowait }
	acl=${acl/ +wait/}
	# shellcheck disable=SC2086
	tcli ${acl//>PASSWORD/>locker-pw} | grep -qx OK
	run -69 --separate-stderr rlock -u "rediss://nowait@localhost:$PORT" "${tls[@]}" --wait-replicas 1 \
		-k x -- touch ran
	assert_regex "$stderr" "NOPERM.*'wait'"
	[[ ! -e ran ]]
}

@test "wrong password: 69, a clear message, never the password" {
	REDISCLI_AUTH=not-the-pw run -69 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'authentication|WRONGPASS'
	[[ $stderr != *not-the-pw* ]]
	[[ ! -e ran ]]
}

# ---------------------------------------------------------------------------------
# password sources

@test "password order: --password-file > REDISCLI_AUTH/RLOCK_PASSWORD > config 'password ='" {
	local tls=(--cacert "$TLS_CERTS/ca.pem") url=rediss://locker@localhost:$PORT
	printf 'password = wrong-config\n' >c.conf && chmod 600 c.conf
	printf 'locker-pw\n' >good && chmod 600 good
	printf 'wrong-file\n' >bad && chmod 600 bad
	run -69 rlock --config c.conf -u "$url" "${tls[@]}" -k x -- true
	REDISCLI_AUTH=locker-pw run -0 rlock --config c.conf -u "$url" "${tls[@]}" -k x -- true
	RLOCK_PASSWORD=locker-pw run -0 rlock --config c.conf -u "$url" "${tls[@]}" -k x -- true
	REDISCLI_AUTH=wrong-env run -0 rlock --config c.conf --password-file good -u "$url" "${tls[@]}" -k x -- true
	REDISCLI_AUTH=locker-pw run -69 rlock --config c.conf --password-file bad -u "$url" "${tls[@]}" -k x -- true
	# --user instead of the user in the URL
	REDISCLI_AUTH=locker-pw run -0 rlock --user locker -u "rediss://localhost:$PORT" "${tls[@]}" -k x -- true
}

@test "password in the URL on the command line: works, with a warning about ps" {
	run -0 --separate-stderr rlock -u "rediss://locker:locker-pw@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- echo ran
	assert_output ran
	assert_regex "$stderr" 'password on the command line.*ps'
	[[ $stderr != *locker-pw* ]]
	# from the environment or a file: no warning
	REDISCLI_AUTH=locker-pw run -0 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- echo ran
	assert_equal "$stderr" ""
}

@test "the password is in no output (-vvv, --status, --list), not in the command's env nor in ps" {
	install_readme_config
	run -0 cron "rlock -vvv -k p -- sh -c 'tr \"\\0\" \"\\n\" </proc/\$\$/environ; echo; tr \"\\0\" \" \" </proc/\$PPID/cmdline'"
	[[ $output != *locker-pw* ]] || fail "password in -vvv output or the command's environment"
	assert_output --partial 'RLOCK_KEY=rlock:{p}'
	# while it runs, neither rlock's command line nor the command's environment has it
	export REDISCLI_AUTH=locker-pw
	rlock_bg -vvv -u "rediss://locker@localhost:$PORT" --cacert "$TLS_CERTS/ca.pem" -k p -- "$HOLD" h
	wait_until 30 test -e h.started
	! grep -qa locker-pw "/proc/$RLOCK_PID/cmdline" || fail "password in rlock's cmdline"
	# the user's own exported variable passes through untouched (SPEC §5)
	grep -qa REDISCLI_AUTH=locker-pw "/proc/$(cat h.pid)/environ" || fail "REDISCLI_AUTH not passed through"
	run -75 cron "rlock -vvv -k p --status --json"
	[[ $output != *locker-pw* ]]
	run -0 cron "rlock -vvv --list"
	[[ $output != *locker-pw* ]]
	touch h.release
	rlock_wait
	assert_equal "$RLOCK_STATUS" 0
	! grep -qa locker-pw "$RLOCK_OUT" "$RLOCK_ERR" || fail "password in -vvv output"
}

# ---------------------------------------------------------------------------------
# TLS: what docs/production.md promises

@test "TLS: verified against the system trust store by default (test CA unknown: 69)" {
	# (a generous --connect-timeout: at load 40 the handshake outlasted the 2 s default,
	# which is a timeout, not the certificate error this test is about)
	REDISCLI_AUTH=locker-pw run -69 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" \
		--connect-timeout 30s -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'certificate'
	[[ ! -e ran ]]
}

@test "TLS: --cacert and --cacertdir accept the test CA; a wrong CA: 69" {
	export REDISCLI_AUTH=locker-pw
	local url=rediss://locker@localhost:$PORT
	run -0 rlock -u "$url" --cacert "$TLS_CERTS/ca.pem" -k x -- true
	run -0 rlock -u "$url" --cacertdir "$TLS_CERTS/cadir" -k x -- true
	run -69 --separate-stderr rlock -u "$url" --cacert "$TLS_CERTS/other-ca.pem" -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "TLS: the host name or IP is verified; --sni names what is sent and verified" {
	export REDISCLI_AUTH=locker-pw
	local ca=(--cacert "$TLS_CERTS/ca.pem")
	# the certificate carries DNS:localhost and IP:127.0.0.1
	run -0 rlock -u "rediss://locker@127.0.0.1:$PORT" "${ca[@]}" -k x -- true
	run -0 rlock -u "rediss://locker@127.0.0.1:$PORT" "${ca[@]}" --sni localhost -k x -- true
	run -69 --separate-stderr rlock -u "rediss://locker@127.0.0.1:$PORT" "${ca[@]}" \
		--sni redis.example.com -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	# 127.0.0.2 reaches nothing here, but a certificate for 127.0.0.1 is no proof for
	# another address: an IP not in the certificate is refused (via --sni as the name)
	run -69 rlock -u "rediss://locker@localhost:$PORT" "${ca[@]}" --sni 127.0.0.2 -k x -- touch ran
	[[ ! -e ran ]]
}

@test "TLS: an expired server certificate: 69" {
	REDISCLI_AUTH=locker-pw run -69 --separate-stderr rlock -u "rediss://localhost:$EXPIRED_PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'expired'
	[[ ! -e ran ]]
}

@test "TLS: rediss:// to a plaintext server, and redis:// to a TLS server: 69" {
	run -69 --separate-stderr rlock -u "rediss://localhost:$PLAIN_PORT" --cacert "$TLS_CERTS/ca.pem" \
		--connect-timeout 2s -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	run -69 --separate-stderr rlock -u "redis://localhost:$PORT" --io-timeout 1s -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "TLS: --tls with a redis:// URL is the same as rediss://" {
	REDISCLI_AUTH=locker-pw run -0 rlock --tls -u "redis://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- true
}

@test "TLS: client certificates (--cert/--tls-key) for tls-auth-clients yes" {
	local ca=(--cacert "$TLS_CERTS/ca.pem")
	run -69 --separate-stderr rlock -u "rediss://localhost:$CLIENTAUTH_PORT" "${ca[@]}" -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	run -0 rlock -u "rediss://localhost:$CLIENTAUTH_PORT" "${ca[@]}" \
		--cert "$TLS_CERTS/client.pem" --tls-key "$TLS_CERTS/client.key" -k x -- touch ran
	[[ -e ran ]]
	# the same from a config file
	printf 'url = rediss://localhost:%s\ncacert = %s\ncert = %s\ntls-key = %s\n' "$CLIENTAUTH_PORT" \
		"$TLS_CERTS/ca.pem" "$TLS_CERTS/client.pem" "$TLS_CERTS/client.key" >c.conf
	run -0 rlock --config c.conf -k x -- true
}

# tls_protocol_server VERSION: a TLS server limited to VERSION, ready when it listens
# (redis-cli may not speak VERSION, so readiness is "the port is taken"). Sets P_PORT,
# P_PID.
tls_protocol_server() {
	local dir
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/proto.XXXXXX")
	P_PORT=$(free_port)
	redis-server --port 0 --tls-port "$P_PORT" --bind 127.0.0.1 \
		--tls-cert-file "$TLS_CERTS/server.pem" --tls-key-file "$TLS_CERTS/server.key" \
		--tls-ca-cert-file "$TLS_CERTS/ca.pem" --tls-auth-clients no --tls-protocols "$1" \
		--save '' --appendonly no --daemonize no --dir "$dir" \
		</dev/null >"$dir/redis.log" 2>&1 3>&- 4>&- &
	P_PID=$!
	track_pid "$P_PID"
	wait_until 30 not _port_free "$P_PORT"
}

@test "TLS: a server that only speaks TLS 1.1 is refused; 1.2 and 1.3 are fine" {
	tls_protocol_server TLSv1.1
	run -69 --separate-stderr rlock -u "rediss://localhost:$P_PORT" --cacert "$TLS_CERTS/ca.pem" -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	redis_stop "$P_PID"
	local v
	for v in TLSv1.2 TLSv1.3; do
		tls_protocol_server "$v"
		wait_until 30 eval 'redis-cli --tls --cacert "$TLS_CERTS/ca.pem" -h 127.0.0.1 -p "$P_PORT" ping 2>/dev/null | grep -q PONG'
		run -0 rlock -u "rediss://localhost:$P_PORT" --cacert "$TLS_CERTS/ca.pem" -k x -- true
		redis_stop "$P_PID"
	done
}

@test "TLS: --insecure skips verification (a throwaway server only)" {
	run -0 rlock -u "rediss://localhost:$EXPIRED_PORT" --insecure -k x -- true
	run -0 rlock -u "rediss://localhost:$PORT" --insecure --cacert "$TLS_CERTS/other-ca.pem" -k x -- true
}

@test "eviction: the page's noeviction advice: the TLS server (noeviction) draws no warning" {
	assert_equal "$(tcli CONFIG GET maxmemory-policy | sed -n 2p)" noeviction
	REDISCLI_AUTH=locker-pw run -0 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -v -k x -- true
	[[ $stderr != *maxmemory-policy* ]] || fail "$stderr"
	tcli CONFIG SET maxmemory-policy allkeys-lru >/dev/null
	REDISCLI_AUTH=locker-pw run -0 --separate-stderr rlock -u "rediss://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -v -k x -- true
	assert_regex "$stderr" 'maxmemory-policy allkeys-lru.*evict'
	REDISCLI_AUTH=locker-pw run -0 --separate-stderr rlock -q -u "rediss://locker@localhost:$PORT" \
		--cacert "$TLS_CERTS/ca.pem" -k x -- sleep 0.5
	tcli CONFIG SET maxmemory-policy noeviction >/dev/null
	assert_equal "$stderr" ""
}
