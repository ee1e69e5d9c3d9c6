#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Config file (SPEC §6): --config or $RLOCK_CONFIG (one file), else the layers merged key by key
# (/etc/rlock.conf, $XDG_CONFIG_DIRS, $XDG_CONFIG_HOME or ~/.config), `long-option = value` syntax, comments,
# flags, errors naming FILE:LINE, refusal of a secret-bearing file readable by others,
# and precedence: command line > environment > config file. Cron's bare environment
# (env -i) still finds the user's config.
#
# Never touches the real /etc or ~: every config lives under $BATS_TEST_TMPDIR.

load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	# A password-protected server first (its coordinates saved), then the main one.
	# (redis_start polls PING, which a requirepass server refuses: set it afterwards)
	redis_start
	rcli CONFIG SET requirepass s3cret-pw >/dev/null
	export AUTH_PORT=$REDIS_PORT AUTH_PID=$REDIS_PID
	redis_start
}

setup() {
	common_setup
	# Each test gets its own XDG dir and HOME, both empty unless the test writes them.
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/xdg
	export HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$XDG_CONFIG_HOME" "$HOME"
}

# write_conf FILE [MODE]: write stdin to FILE (parent dirs created), mode 600 unless told.
write_conf() {
	mkdir -p "$(dirname "$1")"
	cat >"$1"
	chmod "${2:-600}" "$1"
}

# show_env: a shell command printing the RLOCK_KEY and RLOCK_TTL_MS it was given.
show_env='echo "key=$RLOCK_KEY ttl=$RLOCK_TTL_MS"'

# ---------------------------------------------------------------------------------
# search path

@test "--config FILE: settings are applied (url, prefix, ttl)" {
	write_conf my.conf <<EOF
url = $REDIS_URL
prefix = cfg:
ttl = 7s
EOF
	run -0 env -u REDIS_URL "$RLOCK" --config my.conf -k x -c "$show_env"
	assert_output 'key=cfg:{x} ttl=7000'
}

@test "\$RLOCK_CONFIG names the config file" {
	write_conf "$BATS_TEST_TMPDIR/env.conf" <<EOF
url = $REDIS_URL
prefix = viaenv:
EOF
	RLOCK_CONFIG=$BATS_TEST_TMPDIR/env.conf run -0 env -u REDIS_URL "$RLOCK" -k x -c "$show_env"
	assert_output --partial 'key=viaenv:{x}'
}

@test "--config beats \$RLOCK_CONFIG" {
	printf 'prefix = fromenv:\n' | write_conf env.conf
	printf 'prefix = fromcli:\n' | write_conf cli.conf
	RLOCK_CONFIG=env.conf run -0 rlock --config cli.conf -k x -c "$show_env"
	assert_output --partial 'key=fromcli:{x}'
}

@test "a relative \$RLOCK_CONFIG is refused (64, one line): it reaches the command's nested runs, in other directories" {
	printf 'prefix = fromenv:\n' | write_conf env.conf
	RLOCK_CONFIG=env.conf run -64 --separate-stderr rlock -k x -- true
	assert_equal "${#stderr_lines[@]}" 1
	assert_output ''
	[[ $stderr == *"RLOCK_CONFIG: 'env.conf' is not an absolute path"* ]] || fail "$stderr"
	# the command of a run that read it (absolute) finds the same file from anywhere
	RLOCK_CONFIG=$PWD/env.conf run -0 rlock -k x -- sh -c 'cd / && "$RLOCK" -k y -c "$0"' "$show_env"
	assert_output --partial 'key=fromenv:{y}'
}

@test "\$XDG_CONFIG_HOME/rlock/config is read" {
	printf 'prefix = xdg:\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=xdg:{x}'
}

@test "\$RLOCK_CONFIG beats \$XDG_CONFIG_HOME/rlock/config" {
	printf 'prefix = xdg:\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	printf 'prefix = named:\n' | write_conf named.conf
	RLOCK_CONFIG=$PWD/named.conf run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=named:{x}'
}

@test "~/.config/rlock/config is read when XDG_CONFIG_HOME is unset" {
	printf 'prefix = home:\n' | write_conf "$HOME/.config/rlock/config"
	run -0 env -u XDG_CONFIG_HOME "$RLOCK" -k x -c "$show_env"
	assert_output --partial 'key=home:{x}'
}

@test "~/.config/rlock/config is not read when XDG_CONFIG_HOME is set" {
	# a broken file there would make rlock exit 64 if it were read
	printf 'no-such-setting = 1\n' | write_conf "$HOME/.config/rlock/config"
	run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=rlock:{x}'
}

@test "an empty XDG_CONFIG_HOME counts as unset: ~/.config/rlock/config is read" {
	printf 'prefix = home:\n' | write_conf "$HOME/.config/rlock/config"
	XDG_CONFIG_HOME='' run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=home:{x}'
}

@test "a relative XDG_CONFIG_HOME is ignored, as the XDG spec says: the directory the job runs in names no config" {
	# A job that runs in a checkout (CI) must not take its lock server from a file the
	# checkout ships (.config/rlock/config) because XDG_CONFIG_HOME=.config.
	printf 'prefix = home:\n' | write_conf "$HOME/.config/rlock/config"
	printf 'prefix = checkout:\n' | write_conf "$PWD/.config/rlock/config"
	XDG_CONFIG_HOME=.config run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=home:{x}'
}

@test "a relative HOME is no home: the directory the job runs in names no ~/.config/rlock/config" {
	printf 'prefix = checkout:\n' | write_conf "$PWD/.config/rlock/config"
	HOME=. XDG_CONFIG_HOME='' run -0 rlock -k x -c "$show_env"
	refute_output --partial 'key=checkout:'
	# an absolute one is read
	HOME=$PWD XDG_CONFIG_HOME='' run -0 rlock -k x -c "$show_env"
	assert_output --partial 'key=checkout:{x}'
}

@test "a relative path in a config file is refused (64, FILE:LINE): a config serves runs in any directory" {
	# cacert = ca.pem would trust the CA of whatever directory a job runs in (a
	# checkout's); a password file, a log, the events and metrics files likewise.
	local k
	for k in cacert cacertdir cert tls-key password-file sentinel-password-file log-file events metrics-file; do
		printf 'ttl = 5s\n%s = rel/file\n' "$k" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- true
		local shown=rel/file
		[[ $k != *password-file ]] || shown=... # a password put there by mistake is not shown
		assert_equal "$stderr" "rlock: c.conf:2: $k = '$shown': a path in a config file must be absolute (a run may start in any directory) (try 'rlock --help')"
	done
	# what is no path stays as it was: events = - (stderr), password-file = cred:NAME
	printf 'events = -\n' | write_conf c.conf
	run -0 --separate-stderr rlock --config c.conf -k x -- true
}

@test "no config file anywhere: defaults" {
	run -0 rlock -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=30000'
}

@test "cron's bare environment (env -i HOME=...): ~/.config/rlock/config is found" {
	write_conf "$HOME/.config/rlock/config" <<EOF
# as written for cron
url = $REDIS_URL
prefix = cron:
EOF
	run -0 env -i HOME="$HOME" "$RLOCK" -k nightly -c 'echo "key=$RLOCK_KEY"; touch ran'
	assert_output 'key=cron:{nightly}'
	[[ -e ran ]]
	key_absent 'cron:{nightly}'
	# the fence counter proves it really went through the configured server
	assert_equal "$(rcli GET 'cron:{nightly}:fence')" 1
}

@test "cron's bare environment: XDG_CONFIG_HOME alone is enough too" {
	write_conf "$XDG_CONFIG_HOME/rlock/config" <<EOF
url = $REDIS_URL
prefix = xcron:
EOF
	run -0 env -i XDG_CONFIG_HOME="$XDG_CONFIG_HOME" "$RLOCK" -k nightly -c 'echo "key=$RLOCK_KEY"'
	assert_output 'key=xcron:{nightly}'
}

@test "env -i with no HOME at all: no crash (HOME falls back to the passwd entry)" {
	local pwhome
	pwhome=$(getent passwd "$(id -u)" | cut -d: -f6)
	[[ ! -e $pwhome/.config/rlock/config ]] || ci_skip "the real user has a ~/.config/rlock/config"
	[[ ! -e /etc/rlock.conf ]] || ci_skip "this machine has an /etc/rlock.conf"
	run -0 env -i "$RLOCK" -u "$REDIS_URL" -k x -c 'echo "key=$RLOCK_KEY"'
	assert_output 'key=rlock:{x}'
}

@test "--config naming a missing file: 66" {
	run -66 --separate-stderr rlock --config "$BATS_TEST_TMPDIR/nope.conf" -k x -- touch ran
	assert_regex "$stderr" "^rlock: .*nope.conf"
	[[ ! -e ran ]]
}

@test "\$RLOCK_CONFIG naming a missing file: 66" {
	RLOCK_CONFIG=$BATS_TEST_TMPDIR/nope.conf run -66 --separate-stderr rlock -k x -- touch ran
	assert_regex "$stderr" "nope.conf"
	[[ ! -e ran ]]
}

@test "--config naming a directory: 66" {
	mkdir confdir
	run -66 rlock --config confdir -k x -- touch ran
	[[ ! -e ran ]]
}

# ---------------------------------------------------------------------------------
# syntax

@test "comments, blank lines, indentation, tabs, no spaces around '=' and CRLF" {
	printf '# a comment\n\n   # indented comment\n\tprefix\t=\tsyn:\n\nttl=4s\r\n  \n' |
		write_conf c.conf
	run -0 rlock --config c.conf -k x -c "$show_env"
	assert_output 'key=syn:{x} ttl=4000'
}

@test "a file saved by a Windows editor (a UTF-8 BOM, CRLF) is read as git config reads it; a BOM elsewhere is no setting" {
	printf '\357\273\277prefix = win:\r\nttl = 4s\r\n' | write_conf c.conf
	run -0 --separate-stderr rlock --config c.conf -k x -c "$show_env"
	assert_output 'key=win:{x} ttl=4000'
	printf 'ttl = 4s\n\357\273\277prefix = win:\n' | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_equal "$stderr" "rlock: c.conf:2: unknown setting '\\xef...' (try 'rlock --help')"
	[[ ! -e ran ]]
}

@test "a NUL byte in a config file: 64 saying so, wherever it is (it was 'line too long', or the rest of a last line dropped)" {
	local content
	for content in 'ttl = 5s\0junk\n' 'ttl = 5s\0junk' 'ttl = 5s\n\0'; do
		# shellcheck disable=SC2059  # the content is the format: its \0 is the byte
		printf "$content" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_regex "$stderr" "^rlock: c\.conf:[12]: a NUL byte in the line \(not a text file\?\) \(try 'rlock --help'\)$"
	done
	[[ ! -e ran ]]
}

@test "a later line overrides an earlier one" {
	printf 'ttl = 4s\nttl = 9s\n' | write_conf c.conf
	run -0 rlock --config c.conf -k x -c "$show_env"
	assert_output --partial 'ttl=9000'
}

@test "flags: 'no-wait' and 'no-wait = true' both apply" {
	rcli SET 'rlock:{f}' someone-else PX 30000
	local form
	for form in 'no-wait' 'no-wait = true' 'no-wait = yes' 'no-wait = 1'; do
		printf '%s\n' "$form" | write_conf c.conf
		# without the flag this would wait forever; timeout bounds it should the flag be
		# ignored (60 s: valgrind on a loaded machine)
		run -75 timeout 60 "$RLOCK" --config c.conf -k f -- touch ran
		[[ ! -e ran ]]
	done
}

@test "flags: 'tls' and 'tls = true' switch TLS on (refused by a plaintext server: 69)" {
	local form
	for form in 'tls' 'tls = true'; do
		printf '%s\ninsecure\nconnect-timeout = 2s\n' "$form" | write_conf c.conf
		run -69 rlock --config c.conf -k t -- touch ran
		[[ ! -e ran ]]
	done
	# and without it, the same server is fine
	run -0 rlock -k t -- touch ran
}

@test "a switch: true/yes/on/1 set it, false/no/off/0 leave it off, else 64 listing them" {
	local v
	for v in false no off 0 FALSE No; do
		printf '# x\ntls = %s\n' "$v" | write_conf c.conf
		run -0 rlock --config c.conf -k x -- touch ran
		[[ -e ran ]] || fail "tls = $v: did not run"
		rm ran
	done
	printf '# x\ntls = maybe\n' | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_regex "$stderr" "c\.conf:2: 'tls' is a switch"
	assert_regex "$stderr" "true, yes, on or 1 \(on\), or false, no, off or 0 \(off\)"
	[[ ! -e ran ]]
}

@test "conflict-exit-code, wait and on-lost are accepted in a config file" {
	rcli SET 'rlock:{b}' someone-else PX 30000
	printf 'conflict-exit-code = 3\nwait = 300ms\non-lost = kill\nkill-after = 1s\n' | write_conf c.conf
	run -3 timeout 10 "$RLOCK" --config c.conf -k b -- touch ran
	[[ ! -e ran ]]
}

@test "unknown setting: 64, one line 'FILE:LINE: unknown setting'" {
	printf '# comment\n\nprefix = ok:\nbogus-thing = 1\n' | write_conf "$BATS_TEST_TMPDIR/u.conf"
	run -64 --separate-stderr rlock --config "$BATS_TEST_TMPDIR/u.conf" -k x -- touch ran
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "${stderr_lines[0]}" "^rlock: .*$BATS_TEST_TMPDIR/u\.conf:4: unknown setting 'bogus-thing'"
	[[ ! -e ran ]]
}

@test "unknown setting in the XDG config is reported with its path" {
	printf 'nope\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	run -64 --separate-stderr rlock -k x -- touch ran
	assert_regex "$stderr" "$XDG_CONFIG_HOME/rlock/config:1: unknown setting 'nope'"
	[[ ! -e ran ]]
}

@test "options that name one run are not allowed in a config file" {
	local opt
	for opt in 'key = x' 'command = true' 'config = other.conf' 'status' 'break' 'list' \
		'help' 'version' 'verbose' 'quiet' 'json'; do
		printf '# first\n%s\n' "$opt" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_regex "$stderr" "c\.conf:2: '${opt%% *}' is not allowed in a config file"
		[[ ! -e ran ]]
	done
	# short letters are not setting names at all
	for opt in 'k = x' 'v'; do
		printf '# first\n%s\n' "$opt" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_regex "$stderr" "c\.conf:2: unknown setting '${opt%% *}'"
		[[ ! -e ran ]]
	done
}

@test "a setting that needs a value without one: 64 naming FILE:LINE" {
	local line
	for line in 'ttl' 'ttl =' 'url = ' 'prefix' 'prefix = '; do
		printf '%s\n' "$line" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_regex "$stderr" "c\.conf:1:"
		[[ ! -e ran ]]
	done
}

@test "a bad value: 64 naming FILE:LINE" {
	local line
	for line in 'ttl = soon' 'conflict-exit-code = 300' 'on-lost = sometimes' \
		'min-hold = -1s' 'connect-timeout = 0'; do
		printf '\n\n%s\n' "$line" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_regex "$stderr" "c\.conf:3:"
		[[ ! -e ran ]]
	done
	# a bad url in the config (used when no URL comes from the environment) names the file
	printf '\n\nurl = http://example.com\n' | write_conf c.conf
	run -64 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k x -- touch ran
	assert_regex "$stderr" "c\.conf.*http"
	[[ ! -e ran ]]
}

@test "config errors are reported before any network traffic" {
	printf 'url = redis://127.0.0.1:%s\nbogus = 1\n' "$(dead_port)" | write_conf c.conf
	run -64 rlock --config c.conf -k x -- touch ran
}

# ---------------------------------------------------------------------------------
# secrets

@test "password = SECRET in a mode-600 config authenticates" {
	write_conf c.conf 600 <<EOF
url = redis://127.0.0.1:$AUTH_PORT
password = s3cret-pw
EOF
	run -0 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	[[ -e ran ]]
	refute_output --partial s3cret-pw
	[[ $stderr != *s3cret-pw* ]]
}

@test "password in a config accessible by others or writable by its group: refused, 66" {
	local mode
	for mode in 644 604 602 601 666; do
		printf 'url = redis://127.0.0.1:%s\npassword = s3cret-pw\n' "$AUTH_PORT" | write_conf c.conf "$mode"
		run -66 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
		assert_regex "$stderr" "c\.conf.*(accessible|writable) by others \(mode $mode\)"
		[[ $stderr != *s3cret-pw* ]]
		[[ ! -e ran ]]
	done
	for mode in 660 620; do
		printf 'url = redis://127.0.0.1:%s\npassword = s3cret-pw\n' "$AUTH_PORT" | write_conf c.conf "$mode"
		run -66 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
		assert_regex "$stderr" "c\.conf.*writable by its group \(mode $mode\)"
		[[ ! -e ran ]]
	done
	# owner-only modes, and a group that may only read (a shared /etc/rlock.conf,
	# 0640 root:rlock), are accepted
	for mode in 400 600 700 640 440 610; do
		printf 'url = redis://127.0.0.1:%s\npassword = s3cret-pw\n' "$AUTH_PORT" | write_conf c.conf "$mode"
		run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
		[[ -e ran ]]
		rm ran
	done
}

@test "a url with user:password@ in a world-readable config: refused, 66" {
	printf 'url = redis://default:s3cret-pw@127.0.0.1:%s\n' "$AUTH_PORT" | write_conf c.conf 644
	run -66 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	assert_regex "$stderr" 'c\.conf'
	[[ $stderr != *s3cret-pw* ]]
	[[ ! -e ran ]]
	chmod 600 c.conf
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	[[ -e ran ]]
}

@test "a world-readable config whose url has an '@' but no password is fine; a password in any URL of a list is not" {
	# a user name alone is no secret (it draws the no-password warning, and runs)
	printf 'url = redis://nobody@127.0.0.1:%s\n' "$REDIS_PORT" | write_conf c.conf 644
	run -0 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	[[ -e ran ]]
	refute_regex "$stderr" 'holds a password'
	rm ran
	# a password in the second URL of a Redlock list (the first has a port's ':')
	printf 'url = redis://127.0.0.1:1,redis://:s3cret-pw@127.0.0.1:2,redis://127.0.0.1:3\n' |
		write_conf c.conf 644
	run -66 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	assert_regex "$stderr" 'c\.conf.*holds a password'
	[[ $stderr != *s3cret-pw* ]]
	[[ ! -e ran ]]
}

@test "url: a Redlock list in a config file is read as a list (each URL checked); an empty one is refused" {
	# one node answers, two are dead: a quorum of 3 (2) is not reached, so 69, naming 3
	printf 'url = redis://127.0.0.1:%s,redis://127.0.0.1:1,redis://127.0.0.1:2\n' "$REDIS_PORT" |
		write_conf c.conf
	run -69 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -n -- touch ran
	assert_regex "$stderr" 'of 3 nodes'
	[[ ! -e ran ]]
	printf 'url = redis://127.0.0.1:1,,redis://127.0.0.1:2\n' | write_conf c.conf
	run -64 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	assert_regex "$stderr" 'c\.conf:1: empty URL in the list'
	printf 'url = redis://127.0.0.1:1,redis://[::1\n' | write_conf c.conf
	run -64 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	assert_regex "$stderr" 'c\.conf:1: '
}

@test "a world-readable config without a secret is fine (password-file points elsewhere)" {
	printf 's3cret-pw\n' >pw && chmod 600 pw
	write_conf c.conf 644 <<EOF
url = redis://127.0.0.1:$AUTH_PORT
password-file = $PWD/pw
EOF
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	[[ -e ran ]]
}

@test "password-file named in a config must itself be private" {
	printf 's3cret-pw\n' >pw && chmod 644 pw
	printf 'password-file = %s/pw\n' "$PWD" | write_conf c.conf
	run -66 --separate-stderr rlock --config c.conf -k p -- touch ran
	assert_regex "$stderr" 'pw'
	[[ $stderr != *s3cret-pw* ]]
	[[ ! -e ran ]]
}

@test "wrong password from the config: 69 with a clear message, never the password" {
	printf 'url = redis://127.0.0.1:%s\npassword = wrong-pw\n' "$AUTH_PORT" | write_conf c.conf
	run -69 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	[[ $stderr != *wrong-pw* ]]
	assert_regex "$stderr" '^rlock:'
	[[ ! -e ran ]]
}

@test "the config's password is not in the command's environment" {
	printf 'url = redis://127.0.0.1:%s\npassword = s3cret-pw\n' "$AUTH_PORT" | write_conf c.conf
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- sh -c 'cat /proc/$$/environ | tr "\0" "\n"'
	refute_output --partial s3cret-pw
	assert_output --partial 'RLOCK_KEY=rlock:{p}'
}

@test "the config file's descriptor does not leak into the command" {
	printf 'prefix = fd:\n' | write_conf c.conf
	run -0 rlock --config c.conf -k x -- sh -c 'ls -l /proc/$$/fd/'
	refute_output --partial 'c.conf'
}

# ---------------------------------------------------------------------------------
# precedence: command line > environment > config file

@test "url: REDIS_URL < config < RLOCK_URL < --url (REDIS_URL never beats the config)" {
	local dead good=$REDIS_URL
	dead=$(dead_port)
	printf 'url = %s\nconnect-timeout = 1s\n' "$good" | write_conf c.conf
	# the config beats REDIS_URL (the application's own Redis): regression, issue 14.6
	REDIS_URL=redis://127.0.0.1:$dead run -0 --separate-stderr rlock -v --config c.conf -k u -- true
	assert_regex "$stderr" "server $good \(URL from config c\.conf:1\)"
	# REDIS_URL is still used when nothing else names a server
	printf 'connect-timeout = 1s\n' | write_conf c2.conf
	REDIS_URL=$good run -0 --separate-stderr rlock -v --config c2.conf -k u -- true
	assert_regex "$stderr" "server $good \(URL from REDIS_URL\)"
	# RLOCK_URL beats the config
	printf 'url = redis://127.0.0.1:%s\nconnect-timeout = 1s\n' "$dead" | write_conf c.conf
	run -69 rlock -n --config c.conf -k u -- true
	RLOCK_URL=$good REDIS_URL=redis://127.0.0.1:$dead run -0 --separate-stderr rlock -v --config c.conf -k u -- true
	assert_regex "$stderr" "server $good \(URL from RLOCK_URL\)"
	# --url beats both
	RLOCK_URL=redis://127.0.0.1:$dead REDIS_URL=redis://127.0.0.1:$dead \
		run -0 --separate-stderr rlock -v --config c.conf -u "$good" -k u -- true
	assert_regex "$stderr" "server $good \(URL from --url\)"
	# the default, named as such
	run -69 --separate-stderr env -u REDIS_URL "$RLOCK" -v -n --connect-timeout 1s -k u -- true
	assert_regex "$stderr" "server redis://127\.0\.0\.1:6379 \(URL from default\)"
}

@test "prefix: config < RLOCK_PREFIX < --prefix" {
	printf 'prefix = conf:\n' | write_conf c.conf
	run -0 rlock --config c.conf -k x -c "$show_env"
	assert_output --partial 'key=conf:{x}'
	RLOCK_PREFIX=env: run -0 rlock --config c.conf -k x -c "$show_env"
	assert_output --partial 'key=env:{x}'
	RLOCK_PREFIX=env: run -0 rlock --config c.conf --prefix cli: -k x -c "$show_env"
	assert_output --partial 'key=cli:{x}'
}

@test "prefix: an empty one is no prefix only on the command line; RLOCK_PREFIX= and prefix = are 64, never a silent other key" {
	run -0 rlock --config '' --prefix '' -k x -c "$show_env"
	assert_output --partial 'key={x}'
	# set and empty (a template that expanded to nothing): refused, not the default nor none
	RLOCK_PREFIX='' run -64 --separate-stderr rlock --config '' -k x -- touch ran
	assert_regex "$stderr" "RLOCK_PREFIX is set but empty: .*--prefix ''"
	assert_equal "${#lines[@]}" 0
	assert [ ! -e ran ]
	# the command line above it decides
	RLOCK_PREFIX='' run -0 rlock --config '' --prefix cli: -k x -c "$show_env"
	assert_output --partial 'key=cli:{x}'
	RLOCK_PREFIX='' run -0 rlock --config '' --prefix '' -k x -c "$show_env"
	assert_output --partial 'key={x}'
	printf 'prefix =\n' | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_regex "$stderr" "c\.conf:1: 'prefix' needs a value .*--prefix ''"
	assert [ ! -e ran ]
}

@test "a quoted value in the config file is 64 naming it (it would keep its quotes: prefix = \"rlock:\" moved the keys), a password's quotes stand" {
	local v
	for v in '"rlock:"' "'rlock:'"; do
		printf 'prefix = %s\n' "$v" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_equal "$stderr" "rlock: c.conf:1: prefix = $v: the value is in quotes, which are not removed: write it without them (try 'rlock --help')"
		assert [ ! -e ran ]
	done
	printf 'prefix = a"b"\n' | write_conf c.conf
	run -0 rlock --config c.conf -k x -c "$show_env"
	assert_output --partial 'key=a"b"{x}'
	printf 'password = "pw"\n' | write_conf c.conf
	chmod 600 c.conf
	# the server wants none: it reached the server, quotes and all (64 from there)
	run -64 --separate-stderr rlock --config c.conf -w 1 -k x -- true
	refute_regex "$stderr" 'in quotes'
	assert_regex "$stderr" 'has no password set'
}

@test "ttl: --ttl beats the config" {
	printf 'ttl = 5s\n' | write_conf c.conf
	run -0 rlock --config c.conf -t 7s -k x -c "$show_env"
	assert_output --partial 'ttl=7000'
}

@test "exclusive in the config: -s or -l N on the command line wins (not 64)" {
	printf 'exclusive = true\n' | write_conf c.conf
	run -0 --separate-stderr rlock --config c.conf -s -k x -- true
	run -0 --separate-stderr rlock --config c.conf -l 2 -k x -- true
	# on the command line itself the kinds still contradict each other
	run -64 --separate-stderr rlock --config c.conf -x -s -k x -- true
	assert_equal "$stderr" "rlock: -x and -s do not go together (try 'rlock --help')"
}

@test "a config file's setting that a mode does not take is quietly not read there, not a usage error" {
	# once-per, wait-replicas, wait-aof, no-wait and on-lost serve the runs that take
	# them; a run whose command line asks for what they do not go with (-s, several -k,
	# Redlock, --preempt, --preemptible) runs without them, as --acquire runs without
	# a config file's min-hold. On the command line the same pairs stay 64.
	local redlock=$REDIS_URL,redis://127.0.0.1:1,redis://127.0.0.1:2
	printf 'once-per = 1h\n' | write_conf c.conf
	run -0 --separate-stderr rlock --config c.conf -s -k a -- echo ran
	assert_output ran
	run -0 --separate-stderr rlock --config c.conf -l 2 -k a -- true
	run -0 --separate-stderr rlock --config c.conf -k a -k b -- true
	printf 'once-per = 1h\nwait-replicas = 1\nwait-aof = 1\nno-wait\non-lost = ignore\n' | write_conf r.conf
	# (two of the three nodes are down: no quorum, 69 at once with no-wait; not 64)
	run -69 --separate-stderr rlock --config r.conf -u "$redlock" -k a -- true
	printf 'no-wait\non-lost = ignore\n' | write_conf q.conf
	run -0 --separate-stderr rlock --config q.conf --preempt -k q -- echo ran
	assert_output ran
	run -0 --separate-stderr rlock --config q.conf --preemptible -k q -- echo ran
	assert_output ran
	run -64 --separate-stderr rlock --config /dev/null --once-per 1h -s -k a -- true
	run -64 --separate-stderr rlock --config /dev/null -n --preempt -k a -- true
	run -64 --separate-stderr rlock --config /dev/null --on-lost ignore --preemptible -k a -- true
	run -64 --separate-stderr rlock --config /dev/null --wait-replicas 1 -u "$redlock" -k a -- true
}

@test "the config's TLS settings serve its TLS server: a plain server named by --url or RLOCK_URL is not refused" {
	# /etc/rlock.conf as rlock.conf(5) shows it: a managed Redis over TLS. A run that
	# names another server (a plain local one) on the command line or in RLOCK_URL
	# speaks to it as its URL says.
	: >ca.pem
	printf 'url = rediss://127.0.0.1:1\ncacert = %s/ca.pem\ntls\n' "$PWD" | write_conf c.conf
	run -0 --separate-stderr rlock --config c.conf -u "$REDIS_URL" -k x -- echo ran
	assert_output ran
	RLOCK_URL=$REDIS_URL run -0 --separate-stderr rlock --config c.conf -k x -- echo ran
	assert_output ran
	# what the command line asks for itself still holds: --tls over a plain URL is TLS,
	# and TLS files without TLS are a mistake
	run -64 --separate-stderr rlock --config /dev/null -u "$REDIS_URL" --cacert ca.pem -k x -- true
	assert_regex "$stderr" 'TLS options need --tls'
	# a config that names TLS files for its own plain server is a mistake too
	printf 'url = %s\ncacert = %s/ca.pem\n' "$REDIS_URL" "$PWD" | write_conf plain.conf
	run -64 --separate-stderr rlock --config plain.conf -k x -- true
	assert_regex "$stderr" 'TLS options need --tls'
}

@test "password: config < REDISCLI_AUTH / RLOCK_PASSWORD < --password-file" {
	printf 'url = redis://127.0.0.1:%s\npassword = wrong-pw\n' "$AUTH_PORT" | write_conf c.conf
	run -69 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- true
	run -0 env -u REDIS_URL REDISCLI_AUTH=s3cret-pw "$RLOCK" --config c.conf -k p -- true
	run -0 env -u REDIS_URL RLOCK_PASSWORD=s3cret-pw "$RLOCK" --config c.conf -k p -- true
	printf 's3cret-pw\n' >pw && chmod 600 pw
	run -0 env -u REDIS_URL REDISCLI_AUTH=wrong-env "$RLOCK" --config c.conf --password-file pw -k p -- true
	printf 'wrong-file\n' >pw2 && chmod 600 pw2
	run -69 env -u REDIS_URL REDISCLI_AUTH=s3cret-pw "$RLOCK" --config c.conf --password-file pw2 -k p -- true
}

@test "password-file in the config + url from the environment" {
	printf 's3cret-pw\n' >pw && chmod 600 pw
	printf 'password-file = %s/pw\n' "$PWD" | write_conf c.conf
	REDIS_URL=redis://127.0.0.1:$AUTH_PORT run -0 rlock --config c.conf -k p -- touch ran
	[[ -e ran ]]
}

@test "password values keep '#', '=' and inner spaces (no inline comments)" {
	redis-cli -p "$AUTH_PORT" -a s3cret-pw --no-auth-warning CONFIG SET requirepass 'p#w=x y' >/dev/null
	printf 'url = redis://127.0.0.1:%s\npassword =  p#w=x y  \n' "$AUTH_PORT" | write_conf c.conf
	run env -u REDIS_URL "$RLOCK" --config c.conf -k p -- touch ran
	redis-cli -p "$AUTH_PORT" -a 'p#w=x y' --no-auth-warning CONFIG SET requirepass s3cret-pw >/dev/null
	assert_equal "$status" 0
	[[ -e ran ]]
}

# ---------------------------------------------------------------------------------
# issue 7 item 9, issue 14 items 6, 7, 11, 13

@test "a FIFO as the config file (--config or the XDG path cron uses): 66 at once (regression, issue 7.9)" {
	mkfifo "$BATS_TEST_TMPDIR/c.fifo"
	run -66 --separate-stderr timeout 10 "$RLOCK" --config "$BATS_TEST_TMPDIR/c.fifo" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "c\.fifo' is not a regular file"
	mkdir -p "$XDG_CONFIG_HOME/rlock"
	mkfifo "$XDG_CONFIG_HOME/rlock/config"
	run -66 --separate-stderr timeout 10 env -i HOME="$HOME" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" \
		"$RLOCK" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "rlock/config' is not a regular file"
	[[ ! -e ran ]]
}

@test "a directory as the config file: 66, 'is a directory'" {
	mkdir cdir
	run -66 --separate-stderr rlock --config cdir -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "cdir' is a directory"
}

@test "trailing ' #' comments after a value (regression, issue 14.13)" {
	write_conf c.conf <<EOF
url = $REDIS_URL # the lock server
ttl = 1m # one minute
prefix = c#1: # a '#' inside a value stays
no-wait # a switch with a comment
tls = no	# tab before the comment
EOF
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k x -c "$show_env"
	assert_output 'key=c#1:{x} ttl=60000'
}

@test "a line that is not 'NAME = VALUE' says so (not 'unknown setting')" {
	printf 'ttl 5s\n' | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "c\.conf:1: 'ttl \.\.\.' is not a setting \(expected 'NAME = VALUE'"
	printf '= 5s\n' | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_regex "$stderr" "c\.conf:1: no setting name before '='"
}

@test "a config line that is not a setting does not show its value: a password written 'password PW', 'password: PW', as redis.conf's requirepass, or as a password-file (64, one line)" {
	local line pw=Cfg-s3cret-W4v8
	for line in "password $pw" "password: $pw" "password:$pw" "sentinel-password	$pw" \
		"requirepass $pw" "url redis://u:$pw@127.0.0.1:1" "password-file = $pw" \
		"sentinel-password-file = $pw"; do
		printf 'ttl = 5s\n%s\n' "$line" | write_conf c.conf
		run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
		assert_one_line_error
		[[ $stderr != *s3cret* && $stderr != *W4v8* ]] || fail "'$line': the password in: $stderr"
		assert_regex "$stderr" "c\.conf:2: "
	done
	# what is shown still names the line's setting
	printf 'password %s\n' "$pw" | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_equal "$stderr" "rlock: c.conf:1: 'password ...' is not a setting (expected 'NAME = VALUE', one per line) (try 'rlock --help')"
	printf 'password:%s\n' "$pw" | write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -k x -- touch ran
	assert_equal "$stderr" "rlock: c.conf:1: unknown setting 'password:...' (try 'rlock --help')"
	[[ ! -e ran ]]
}

@test "user = in the config does not override the user of a --url or RLOCK_URL (regression, issue 7.15)" {
	local a=(redis-cli -p "$AUTH_PORT" -a s3cret-pw --no-auth-warning)
	"${a[@]}" ACL SETUSER cfguser on '>cfg-pw' '~*' '&*' +@all >/dev/null
	"${a[@]}" ACL SETUSER urluser on '>url-pw' '~*' '&*' +@all >/dev/null
	printf 'user = cfguser\npassword = cfg-pw\n' | write_conf c.conf
	# the config alone: its user and password
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf -u "redis://127.0.0.1:$AUTH_PORT" -k p -- true
	# a URL with its own user:password (command line or RLOCK_URL) beats the config's
	run -0 env -u REDIS_URL "$RLOCK" --config c.conf \
		-u "redis://urluser:url-pw@127.0.0.1:$AUTH_PORT" -k p -- true
	RLOCK_URL="redis://urluser:url-pw@127.0.0.1:$AUTH_PORT" run -0 env -u REDIS_URL "$RLOCK" --config c.conf -k p -- true
	# and --user on the command line beats the URL's user
	run -69 --separate-stderr env -u REDIS_URL "$RLOCK" --config c.conf --user cfguser \
		-u "redis://urluser:url-pw@127.0.0.1:$AUTH_PORT" -k p -- true
	assert_regex "$stderr" "wrong user name or password"
}

@test "a user name without a password: one warning line (issue 14.7)" {
	run -0 --separate-stderr rlock -u "redis://weak@${REDIS_URL#redis://}" -k w -- echo ran
	assert_output ran
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^rlock: the URL names a user but no password "
	run -0 --separate-stderr rlock --user weak -k w -- echo ran
	assert_regex "$stderr" "^rlock: user 'weak' has no password"
	# with a password source: no such warning
	RLOCK_PASSWORD=x run -69 --separate-stderr rlock --user weak -k w -- true
	refute_regex "$stderr" "has no password"
}

@test "conflict-exit-code = 0 in the config: --status of a held lock still exits 75 (regression, issue 14.11)" {
	rcli SET 'rlock:{s}' someone PX 60000 >/dev/null
	printf 'conflict-exit-code = 0\n' | write_conf c.conf
	run -75 rlock --config c.conf -k s --status
	run -0 rlock --config c.conf -k free --status
	# -E 0 on the command line too; a non-zero -E is --status's held code
	run -75 rlock -E 0 -k s --status
	run -3 rlock -E 3 -k s --status
	printf 'conflict-exit-code = 4\n' | write_conf c.conf
	run -4 rlock --config c.conf -k s --status
}

# ---------------------------------------------------------------------------------
# issue 27: layered configuration, as git and systemd do

# with_etc_conf FILE CMD...: run CMD in a private mount namespace where /etc/rlock.conf
# is FILE (an overlay on /etc: the real /etc is never touched).
with_etc_conf() {
	local f=$1 d=$BATS_TEST_TMPDIR/etcns
	shift
	mkdir -p "$d"
	unshare -m sh -c 'mount -t tmpfs none "$1" && mkdir "$1/u" "$1/w" &&
		cp -p "$2" "$1/u/rlock.conf" &&
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/u,workdir=$1/w" /etc &&
		shift 2 && exec "$@"' sh "$d" "$f" "$@"
}

@test "the layers merge key by key, later wins: /etc/rlock.conf < XDG_CONFIG_DIRS (last to first) < XDG_CONFIG_HOME" {
	require_tool unshare
	printf 'url = %s\nprefix = etc:\nttl = 5s\nio-timeout = 3s\n' "$REDIS_URL" | write_conf etc.conf
	printf 'ttl = 7s\nprefix = dirB:\n' | write_conf dirB/rlock/config
	printf 'prefix = dirA:\n' | write_conf dirA/rlock/config
	printf 'ttl = 1m\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	# the user's file sets only the ttl: the URL from /etc/rlock.conf still applies
	XDG_CONFIG_DIRS=$PWD/dirA:$PWD/dirB run -0 --separate-stderr with_etc_conf etc.conf \
		"$RLOCK" -v -k x -c "$show_env"
	assert_output 'key=dirA:{x} ttl=60000'
	assert_regex "$stderr" "server $REDIS_URL \(URL from config /etc/rlock\.conf:1\)"
	# without the user's file: the XDG dirs' ttl (dirB), the first dir's prefix (dirA)
	rm "$XDG_CONFIG_HOME/rlock/config"
	XDG_CONFIG_DIRS=$PWD/dirA:$PWD/dirB run -0 with_etc_conf etc.conf "$RLOCK" -k x -c "$show_env"
	assert_output 'key=dirA:{x} ttl=7000'
	# XDG_CONFIG_DIRS unset: /etc/xdg (none here), so /etc/rlock.conf alone
	run -0 with_etc_conf etc.conf env -u XDG_CONFIG_DIRS "$RLOCK" -k x -c "$show_env"
	assert_output 'key=etc:{x} ttl=5000'
}

@test "XDG_CONFIG_DIRS with more directories than rlock reads: the first (the most important) are read, one line names the rest" {
	# The cap dropped the first directories, the most important (XDG: in order of
	# preference), and read the last ones, without a word: another layer's ttl (or
	# server) applied.
	local dirs='' i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		mkdir -p "d$i/rlock"
		dirs+=${dirs:+:}$PWD/d$i
	done
	printf 'ttl = 11s\n' | write_conf d1/rlock/config
	printf 'ttl = 22s\nprefix = last:\n' | write_conf d10/rlock/config
	XDG_CONFIG_DIRS=$dirs run -0 --separate-stderr "$RLOCK" -u "$REDIS_URL" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=11000'
	assert_regex "$stderr" "^rlock: XDG_CONFIG_DIRS names 10 directories: the config files of the first 8 are read, not from $PWD/d9 on"
	((${#stderr_lines[@]} == 1)) || fail "more than one line: $stderr"
	# as many as are read: no line
	XDG_CONFIG_DIRS=${dirs%%:"$PWD"/d9*} run -0 --separate-stderr "$RLOCK" -u "$REDIS_URL" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=11000'
	assert_equal "$stderr" ''
}

@test "RLOCK_CONFIG names one file instead of the layers; empty or /dev/null: no config at all" {
	require_tool unshare
	printf 'prefix = etc:\nttl = 5s\n' | write_conf etc.conf
	printf 'ttl = 1m\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	printf 'prefix = one:\n' | write_conf one.conf
	RLOCK_CONFIG=$PWD/one.conf run -0 with_etc_conf etc.conf "$RLOCK" -k x -c "$show_env"
	assert_output 'key=one:{x} ttl=30000'
	RLOCK_CONFIG='' run -0 with_etc_conf etc.conf "$RLOCK" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=30000'
	RLOCK_CONFIG=/dev/null run -0 with_etc_conf etc.conf "$RLOCK" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=30000'
	run -0 with_etc_conf etc.conf "$RLOCK" --config /dev/null -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=30000'
}

@test "-v and an authentication failure name where the user and the password came from" {
	require_tool unshare
	local a=(redis-cli -p "$AUTH_PORT" -a s3cret-pw --no-auth-warning)
	"${a[@]}" ACL SETUSER layuser on '>lay-pw' '~*' '&*' +@all >/dev/null
	printf 'url = redis://127.0.0.1:%s\nuser = layuser\n' "$AUTH_PORT" | write_conf etc.conf 644
	printf 'password = wrong-pw\n' | write_conf "$XDG_CONFIG_HOME/rlock/config"
	run -69 --separate-stderr with_etc_conf etc.conf env -u REDIS_URL "$RLOCK" -n -k p -- true
	assert_equal "$stderr" "rlock: authentication to 127.0.0.1:$AUTH_PORT failed: wrong user name or password (user from /etc/rlock.conf:2, password from $XDG_CONFIG_HOME/rlock/config:1)"
	RLOCK_PASSWORD=lay-pw run -0 --separate-stderr with_etc_conf etc.conf env -u REDIS_URL "$RLOCK" -v -k p -- true
	assert_regex "$stderr" "rlock: user from /etc/rlock\.conf:2, password from RLOCK_PASSWORD"
}

# ---------------------------------------------------------------------------------
# issue 33: files another user can write (SPEC §12, ssh's rule)

# hostile_layer FILE [MODE]: a layer the user did not write that names a server and a
# metrics file (which rlock would replace).
hostile_layer() {
	write_conf "$1" "${2:-644}" <<EOF
url = redis://127.0.0.1:$AUTH_PORT
metrics-file = $BATS_TEST_TMPDIR/victim
EOF
}

@test "a config layer others can write is refused whole, 66, one line: group- or world-writable, in a directory others can write" {
	echo 'precious' >victim
	local m dir=$BATS_TEST_TMPDIR/xdgdirs
	for m in 664 646; do
		hostile_layer "$dir/rlock/config" "$m"
		run -66 --separate-stderr env XDG_CONFIG_DIRS="$dir" "$RLOCK" -u "$REDIS_URL" -k x -- touch ran
		assert_one_line_error
		assert_regex "$stderr" "rlock/config' is writable by (its group|others) \(mode $m\): refused"
	done
	# The same file, 644, but in a directory anyone can change (not sticky): refused.
	hostile_layer "$dir/rlock/config" 644
	chmod 777 "$dir/rlock"
	run -66 --separate-stderr env XDG_CONFIG_DIRS="$dir" "$RLOCK" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "is in $dir/rlock, which is writable by others \(mode 777\): refused"
	# --config and \$RLOCK_CONFIG too, and the user's own layer.
	chmod 755 "$dir/rlock"
	chmod 664 "$dir/rlock/config"
	run -66 --separate-stderr "$RLOCK" --config "$dir/rlock/config" -k x -- touch ran
	assert_one_line_error
	hostile_layer "$XDG_CONFIG_HOME/rlock/config" 620
	run -66 --separate-stderr "$RLOCK" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	[[ ! -e ran && $(cat victim) == precious ]]
	# A sticky directory (as /tmp) is safe: others cannot replace the user's file in it.
	rm -rf "$dir" "$XDG_CONFIG_HOME/rlock"
	write_conf "$dir/rlock/config" 644 <<<"ttl = 7s"
	chmod 1777 "$dir/rlock"
	run -0 env XDG_CONFIG_DIRS="$dir" "$RLOCK" -u "$REDIS_URL" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=7000'
}

@test "a config, password file or CA reached through a link that others could re-point is refused (66): the link's directory and owner count, not only the target's" {
	echo 'precious' >victim
	local good=$BATS_TEST_TMPDIR/mine ow=$BATS_TEST_TMPDIR/ow
	write_conf "$good/config" 644 <<<"ttl = 7s"
	# the link, in a directory anyone can change (not sticky): whoever can write there
	# can point it at another file
	mkdir -p "$ow"
	chmod 777 "$ow"
	ln -s "$good/config" "$ow/config"
	run -66 --separate-stderr "$RLOCK" --config "$ow/config" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "is reached through the link $ow/config, in $ow, which is writable by others \(mode 777\): refused"
	# a link to that link, from a safe place: the chain is followed, and refused the same
	ln -s "$ow/config" "$good/via"
	run -66 --separate-stderr "$RLOCK" --config "$good/via" -u "$REDIS_URL" -k x -- touch ran
	assert_regex "$stderr" "is reached through the link $ow/config, in $ow"
	# a directory of the path that is a link there: the same
	ln -s "$good" "$ow/d"
	run -66 --separate-stderr "$RLOCK" --config "$ow/d/config" -u "$REDIS_URL" -k x -- touch ran
	assert_regex "$stderr" "is reached through the link $ow/d, in $ow"
	# the password file too
	printf 'secret\n' >"$good/pw"
	chmod 600 "$good/pw"
	ln -s "$good/pw" "$ow/pw"
	run -66 --separate-stderr "$RLOCK" --password-file "$ow/pw" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	# in a sticky directory (as /tmp), the user's own link is safe; another user's is not
	chmod 1777 "$ow"
	run -0 "$RLOCK" --config "$ow/config" -u "$REDIS_URL" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=7000'
	run -0 "$RLOCK" --config "$good/via" -u "$REDIS_URL" -k x -c "$show_env"
	if [[ $EUID == 0 ]]; then
		chown -h nobody "$ow/config"
		run -66 --separate-stderr "$RLOCK" --config "$ow/config" -u "$REDIS_URL" -k x -- touch ran
		assert_regex "$stderr" "is reached through $ow/config, a link of another user \(uid [0-9]+\)"
	fi
	# relative names and .. resolve as the kernel does
	cd "$good"
	run -0 "$RLOCK" --config ./../mine/./config -u "$REDIS_URL" -k x -c "$show_env"
	assert_output 'key=rlock:{x} ttl=7000'
	[[ ! -e ran && ! -e $good/ran && $(cat "$BATS_TEST_TMPDIR/victim") == precious ]]
}

@test "a config layer, password file or CA bundle of another user is refused (66), as ssh refuses it" {
	[[ $EUID == 0 ]] || skip "chown to another user needs root"
	echo 'precious' >victim
	local dir=$BATS_TEST_TMPDIR/xdgdirs
	hostile_layer "$dir/rlock/config" 644
	chown nobody "$dir/rlock/config"
	run -66 --separate-stderr env XDG_CONFIG_DIRS="$dir" "$RLOCK" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "rlock/config' belongs to another user \(uid [0-9]+\): refused"
	# A directory above it that another user owns.
	chown root "$dir/rlock/config"
	chown nobody "$dir/rlock"
	run -66 --separate-stderr env XDG_CONFIG_DIRS="$dir" "$RLOCK" -u "$REDIS_URL" -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "is in $dir/rlock, which belongs to another user"
	[[ ! -e ran && $(cat victim) == precious ]]
	# A password file of another user: it chooses what rlock sends.
	printf 's3cret-pw\n' >pw && chmod 600 pw && chown nobody pw
	run -66 --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$AUTH_PORT" --password-file pw -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "password file 'pw' belongs to another user"
	# TLS files: checked before any connection (no server at that port).
	echo 'not a certificate' >ca.pem && chmod 664 ca.pem
	run -66 --separate-stderr "$RLOCK" -u "rediss://127.0.0.1:1" --cacert ca.pem -k x -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "--cacert: 'ca.pem' is writable by its group \(mode 664\): refused"
	[[ ! -e ran ]]
}

@test "the config's TLS settings set aside for a plain --url/RLOCK_URL server: its password is not sent there in the clear (64); a config without a server of its own keeps TLS" {
	# rlock.conf(5)'s managed Redis over TLS, with its password. A plain server named
	# above the file does not speak TLS: the file's secret, meant for a TLS server, is
	# not sent to it in the clear (AUTH_PORT's server would have accepted it: 0).
	: >ca.pem
	printf 's3cret-pw\n' >pw && chmod 600 pw
	printf 'url = rediss://127.0.0.1:1\npassword-file = %s/pw\ncacert = %s/ca.pem\n' "$PWD" "$PWD" |
		write_conf c.conf
	run -64 --separate-stderr rlock --config c.conf -u "redis://127.0.0.1:$AUTH_PORT" -k x -- echo ran
	refute_output ran
	assert_regex "$stderr" 'in the clear'
	RLOCK_URL=redis://127.0.0.1:$AUTH_PORT run -64 --separate-stderr rlock --config c.conf -k x -- echo ran
	refute_output ran
	# the password given above the file, or TLS asked for, is the user's choice
	RLOCK_PASSWORD=s3cret-pw run -0 --separate-stderr rlock --config c.conf -u "redis://127.0.0.1:$AUTH_PORT" -k x -- echo ran
	assert_output ran
	# the sentinels' password too, for a plain redis-sentinel:// URL named above the file
	printf 'url = REDISS-SENTINEL://127.0.0.1:1/m\nsentinel-password-file = %s/pw\n' "$PWD" |
		write_conf s.conf
	run -64 --separate-stderr rlock --config s.conf -u "redis-sentinel://127.0.0.1:$AUTH_PORT/m" -n -k x -- echo ran
	refute_output ran
	assert_regex "$stderr" "sentinel password .* in the clear"
	# a config file that names no server of its own: its tls is for whichever server
	# the run names (RLOCK_URL per host), never dropped (it spoke plain to it): TLS is
	# set up, so its (empty) CA file is read and refused: 66 naming it, nothing ran
	printf 'tls\ncacert = %s/ca.pem\n' "$PWD" | write_conf notls.conf
	RLOCK_URL=$REDIS_URL run -66 --separate-stderr rlock --config notls.conf -k x -- echo ran
	refute_output ran
	assert_regex "$stderr" 'ca\.pem'
	[[ ${#stderr_lines[@]} == 1 ]] || fail "$stderr"
}

@test "every setting with a value: a bad value is one line naming FILE:LINE (and the setting), 64, no server asked (walks --help)" {
	# the option table's rows (help_options, helpers.bash), each as a config line; a row
	# that names one run is refused as such, also one line
	local port
	port=$(dead_port)
	export REDIS_URL="redis://127.0.0.1:$port"
	local opt arg v n=0 st
	local -a lines
	write_conf c.conf </dev/null
	while read -r opt arg; do
		bad_values "$opt" "$arg" >/dev/null || fail "$opt $arg: a kind of value bad_values does not know"
		local -a bad=()
		mapfile -t bad < <(bad_values "$opt" "$arg")
		# a path in a config file: also a relative one
		[[ $arg != @(FILE|DIR|PATH) || $opt == --config ]] || bad+=(rel/x)
		for v in "${bad[@]}"; do
			n=$((n + 1))
			printf '# %s\n%s = %s\n' "$n" "${opt#--}" "$v" >c.conf # (its mode stays 600)
			"$RLOCK" --config c.conf -k u >out 2>err && st=0 || st=$?
			# (not bats' run: some hundred values, in the asan pass too)
			mapfile -t lines <err
			if ((st != 64)) || [[ -s out || ${#lines[@]} -ne 1 || ${lines[0]} != "rlock: c.conf:2: "* ]]; then
				fail "${opt#--} = $(printf %q "$v"): status $st, stderr: $(cat err)"
			fi
			# a duration's or a number's line names the setting, as the command line's
			# names the option
			[[ $arg != @(DUR|N) || ${lines[0]} == *"${opt#--}"* ]] ||
				fail "${opt#--} = $(printf %q "$v"): the line does not name it: ${lines[0]}"
		done
	done < <(help_options)
	((n > 100)) || fail "only $n values tried: is --help's table read?"
}
