#!/usr/bin/env bats
# Sentinel (SPEC §8): rlock finds the master through any sentinel of a
# redis-sentinel:// URL, confirms its ROLE, and follows a failover (or reports the
# loss). One real topology for the file: master + replica + 3 sentinels (sentinel.bash).

# shellcheck disable=SC2154,SC2016  # bats sets $stderr (run --separate-stderr); wait_until eval '...': expanded on each poll
load helpers
load sentinel

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	sentinel_topology_start
	export FAILOVER=$BATS_FILE_TMPDIR/failover
	sentinel_failover_script "$FAILOVER"
}

teardown_file() { redis_stop_all; }

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	make_hold_script
	# The master may have moved in an earlier test: use whichever it is now.
	MASTER_PORT=$(sentinel_master_port)
	sent_cli "$MASTER_PORT" FLUSHALL >/dev/null
}

teardown() {
	kill_tracked
	# a test that kept a former master from being reconfigured lets it go now
	[[ -z ${ACL_RESTORE_PORT:-} ]] ||
		sent_cli "$ACL_RESTORE_PORT" ACL SETUSER default +replicaof +slaveof >/dev/null
}

@test "--held through the sentinels: 0 from inside the job" {
	# shellcheck disable=SC2016 # $0, $1: the shell's own arguments
	run -0 --separate-stderr rlock -u "$SENT_URL" -k s -- \
		sh -c '"$0" -u "$1" --held && "$0" -u "$1" --held --json' "$RLOCK" "$SENT_URL"
	[[ $output == '{"schema":1,"key":"rlock:{s}","held":true,"ttl_left_ms":'*',"fence":'*'}' ]]
	run -79 --separate-stderr rlock -u "$SENT_URL" -k s --token 0123456789abcdef0123456789abcdef --held
}

@test "the lock is taken on the master that the sentinels name" {
	run -0 --separate-stderr rlock -v -u "$SENT_URL" -k s -- \
		sh -c "redis-cli -p $MASTER_PORT GET \"\$RLOCK_KEY\" >seen; echo \"\$RLOCK_TOKEN\" >token"
	[[ -s token && $(cat seen) == "$(cat token)" ]]
	assert_regex "$stderr" "master 'mymaster' is 127\.0\.0\.1:$MASTER_PORT"
	# --status and --json say which server the sentinels named.
	rlock_bg -u "$SENT_URL" -k st -- "$HOLD" st
	wait_until 30 test -e st.started
	run -75 rlock -u "$SENT_URL" -k st --status
	assert_regex "$output" "master   127\.0\.0\.1:$MASTER_PORT \(Sentinel 'mymaster'\)"
	run -75 rlock -u "$SENT_URL" -k st --status --json
	[[ $(jq -r '.master + " " + (.held | tostring)' <<<"$output") == "127.0.0.1:$MASTER_PORT true" ]]
	run -0 rlock -u "$SENT_URL" --list
	assert_output --partial 'st'
	# A waiter on the same master takes over when the holder releases.
	local holder=$RLOCK_PID
	rlock_bg -u "$SENT_URL" -w 30s -k st -- touch waiter-ran
	local waiter=$RLOCK_PID
	touch st.release
	rlock_wait "$holder"
	((RLOCK_STATUS == 0))
	rlock_wait "$waiter"
	((RLOCK_STATUS == 0))
	[[ -e waiter-ran ]]
	[[ $(sent_cli "$MASTER_PORT" EXISTS 'rlock:{s}') == 0 ]] # released
}

@test "the lost-update checker finds no overlap through the sentinels" {
	RLOCK_URL=$SENT_URL run -0 "$RLOCK_SOURCE_DIR/scripts/lost-update-check" -p 4 -i 10 -k lu \
		--rlock "$RLOCK"
	echo "# $output" >&3
	# through the master the sentinels name: every run counted in its fence
	[[ $(sent_cli "$MASTER_PORT" GET 'rlock:{lu}:fence') == 40 ]]
}

@test "any one live sentinel is enough; none, or an unknown master: 69 with one line (a password for a master that has none: 64)" {
	local d1 d2 live=${SENT_PORTS##* }
	d1=$(dead_port) && d2=$(dead_port)
	run -0 rlock -u "redis-sentinel://127.0.0.1:$d1,127.0.0.1:$d2,127.0.0.1:$live/mymaster" \
		-k s -- touch a
	[[ -e a ]]
	run -69 --separate-stderr rlock -n --connect-timeout 300ms --io-timeout 300ms \
		-u "redis-sentinel://127.0.0.1:$d1,127.0.0.1:$d2/mymaster" -k s -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "no master found for 'mymaster'"
	run -69 --separate-stderr rlock -u "redis-sentinel://127.0.0.1:$live/nosuch" -k s -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "no sentinel knows master 'nosuch'"
	# The master the sentinels name refuses our login (it has no password): final too,
	# a configuration that does not fit it (64)
	REDISCLI_AUTH=not-this-one run -64 --separate-stderr rlock -u "$SENT_URL" -k s -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "127\.0\.0\.1:$MASTER_PORT has no password set, yet rlock was given one"
	[[ ! -e ran ]]
}

@test "-n and the operator's commands ask each sentinel once: none answers, 69 at once naming each (not the discovery's rounds)" {
	local d1 d2 silent url mode t0 t1 token=0123456789abcdef0123456789abcdef
	d1=$(dead_port) && d2=$(dead_port)
	url="redis-sentinel://127.0.0.1:$d1,127.0.0.1:$d2/mymaster"
	for mode in "-k once -n -- touch ran" "-k once --status" "--list" "-k once --token $token --held" \
		"-k once --break" "-k once --reset" "-k once --history"; do
		# shellcheck disable=SC2086 # the mode's words
		run -69 --separate-stderr rlock -u "$url" $mode
		assert_one_line_error
		assert_regex "$stderr" "no master found for 'mymaster' \(each sentinel asked once\): sentinel 127\.0\.0\.1:$d1: .*refused; sentinel 127\.0\.0\.1:$d2: .*refused"
	done
	run -69 --separate-stderr rlock -u "$url" --check
	assert_line --regexp "^unsafe .* reach: no master found for 'mymaster' \(each sentinel asked once\)"
	# one pass (the rounds of a discovery asked each dead sentinel again and again for
	# 3 connect + 3 io timeouts: 10 s with the defaults)
	run -69 --separate-stderr rlock -vv -u "$url" -k once -n -- touch ran
	(($(grep -c "^rlock: sentinel 127\.0\.0\.1:$d1: connect" <<<"$stderr") == 1)) ||
		fail "sentinel $d1 asked more than once: $stderr"
	# A sentinel that accepts and never answers costs its --io-timeout once.
	silent=$(silent_port)
	t0=$(now_ms)
	run -69 --separate-stderr rlock -vv --io-timeout 300ms \
		-u "redis-sentinel://127.0.0.1:$silent,127.0.0.1:$d1/mymaster" -k once -n -- touch ran
	t1=$(now_ms)
	echo "# -n, a silent and a dead sentinel: 69 after $((t1 - t0)) ms (io timeout 300 ms)" >&3
	(($(grep -c "^rlock: sentinel 127\.0\.0\.1:$silent: .*did not answer" <<<"$stderr") == 1)) ||
		fail "the silent sentinel was asked more than once: $stderr"
	assert_regex "${stderr##*$'\n'}" "^rlock: no master found .*sentinel 127\.0\.0\.1:$silent: .*did not answer SENTINEL in time; sentinel 127\.0\.0\.1:$d1: .*refused"
	[[ ! -e ran ]]
	# --check too: its sentinels' findings and its search for the master ask each once
	# (it asked each twice, after the discovery's rounds: 18 s with the defaults)
	silent=$(silent_port)
	run -69 --separate-stderr rlock --io-timeout 300ms \
		-u "redis-sentinel://127.0.0.1:$silent,127.0.0.1:$d1/mymaster" --check
	assert_line --regexp "^unsafe .* reach: no master found for 'mymaster' \(each sentinel asked once\): sentinel 127\.0\.0\.1:$silent: .*did not answer SENTINEL in time; sentinel 127\.0\.0\.1:$d1: .*refused"
	assert_line --regexp "^warn +127\.0\.0\.1:$silent sentinel: .*did not answer SENTINEL in time"
	wait_until 5 eval '(($(silent_conns "$silent") >= 1))'
	assert_equal "$(silent_conns "$silent")" 1
	# one that answers, after it: the master is found through it
	silent=$(silent_port)
	run -2 --separate-stderr rlock --io-timeout 300ms \
		-u "redis-sentinel://127.0.0.1:$silent,127.0.0.1:${SENT_PORTS%% *}/mymaster" --check
	assert_line --regexp "^ok +127\.0\.0\.1:$MASTER_PORT reach: "
	wait_until 5 eval '(($(silent_conns "$silent") >= 1))'
	assert_equal "$(silent_conns "$silent")" 1
}

@test "sentinels that all name a master that does not answer: one look asks it once, and says so once" {
	# a "sentinel" that names the silent port as master, to every question
	local master fake
	master=$(silent_port)
	(exec 3>&- 4>&- perl -MIO::Socket::INET -MIO::Select -e '
		my ($file, $port) = @ARGV;
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Listen => 50, ReuseAddr => 1) or die "listen: $!";
		open my $f, ">", "$file.tmp" or die; print $f $s->sockport, "\n"; close $f;
		rename "$file.tmp", $file;
		$SIG{ALRM} = sub { exit 0 }; alarm 60;
		my $sel = IO::Select->new($s);
		for (;;) { for my $h ($sel->can_read) {
			if ($h == $s) { $sel->add($s->accept); next }
			my $n = sysread($h, my $buf, 4096);
			if (!$n) { $sel->remove($h); close $h; next }
			syswrite($h, "*2\r\n\$9\r\n127.0.0.1\r\n\$" . length($port) . "\r\n$port\r\n")
				if $buf =~ /get-master-addr-by-name/i;
		} }' "$BATS_TEST_TMPDIR/fake.port" "$master") </dev/null >/dev/null 2>&1 &
	track_pid $!
	wait_until 30 test -s fake.port
	fake=$(cat fake.port)
	run -69 --separate-stderr rlock --io-timeout 300ms \
		-u "redis-sentinel://127.0.0.1:$fake,localhost:$fake,[::ffff:127.0.0.1]:$fake/mymaster" -k once -n -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: no master found for 'mymaster' \(each sentinel asked once\): master 127\.0\.0\.1:$master: .*did not answer ROLE in time\$"
	wait_until 5 eval '(($(silent_conns "$master") >= 1))'
	assert_equal "$(silent_conns "$master")" 1
	[[ ! -e ran ]]
}

@test "a first sentinel that accepts and never answers costs one --io-timeout, not one per handle, renewal and release" {
	# A listener that completes TCP (kernel backlog) but never speaks, first in the URL.
	(exec 3>&- 4>&- perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Listen => 50, ReuseAddr => 1) or die "listen: $!";
		open my $f, ">", "$ARGV[0].tmp" or die; print $f $s->sockport, "\n"; close $f;
		rename "$ARGV[0].tmp", $ARGV[0]; sleep 60' "$BATS_TEST_TMPDIR/silent.port") &
	track_pid $!
	wait_until 30 test -s silent.port
	local silent
	silent=$(cat silent.port)
	# -t 1s: the renewals' re-checks ask the sentinels every 250 ms; the release asks too
	run -0 --separate-stderr rlock -vv --io-timeout 1s -t 1s \
		-u "redis-sentinel://127.0.0.1:$silent,127.0.0.1:${SENT_PORTS// /,127.0.0.1:}/mymaster" \
		-k stall -- sleep 1
	assert_regex "$stderr" "released rlock:\{stall\}"
	# asked first once; from then on every handle asks first the one that answered
	(($(grep -c "sentinel 127\.0\.0\.1:$silent: .*did not answer" <<<"$stderr") == 1)) ||
		fail "the silent sentinel was asked first more than once: $stderr"
}

@test "the sentinels' own password: from a file, the URL or the environment; never shown" {
	local port dir pid
	# A fourth sentinel, alone, with a password of its own (the data servers have none).
	port=$(free_port)
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/sentinel.XXXXXX")
	printf 'port %s\nbind 127.0.0.1\ndir %s\nrequirepass Sent1nelPw\nsentinel monitor %s 127.0.0.1 %s 1\n' \
		"$port" "$dir" "$SENT_MASTER" "$MASTER_PORT" >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/log" 2>&1 3>&- 4>&- &
	pid=$!
	track_pid "$pid"
	wait_until 30 sh -c "redis-cli -p $port -a Sent1nelPw --no-auth-warning SENTINEL master $SENT_MASTER | grep -q ^flags"
	local url="redis-sentinel://127.0.0.1:$port/$SENT_MASTER"
	run -69 --separate-stderr rlock -u "$url" -k p -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'requires a password \(NOAUTH\); see --sentinel-password-file'
	printf 'Sent1nelPw\n' >pw && chmod 600 pw
	run -0 --separate-stderr rlock -u "$url" --sentinel-password-file pw -k p -- touch ran
	[[ -e ran && -z $stderr ]]
	RLOCK_SENTINEL_PASSWORD=Sent1nelPw run -0 rlock -u "$url" -k p -- true
	printf 'url = %s\nsentinel-password = Sent1nelPw\n' "$url" >conf && chmod 600 conf
	run -0 rlock --config conf -k p -- true
	chmod 644 conf
	run -66 --separate-stderr rlock --config conf -k p -- true
	assert_regex "$stderr" 'holds a password and is accessible by others'
	run -0 --separate-stderr rlock -u "redis-sentinel://:Sent1nelPw@127.0.0.1:$port/$SENT_MASTER" \
		-k p -- true
	assert_regex "$stderr" 'visible to other users in ps; use --sentinel-password-file'
	printf 'wrong\n' >bad && chmod 600 bad
	run -69 --separate-stderr rlock -u "$url" --sentinel-password-file bad -k p -- true
	assert_one_line_error
	assert_regex "$stderr" 'authentication to sentinel .* failed: wrong user name or password'
	[[ $stderr != *Sent1nelPw* ]]
	# --check: a sentinel that refuses our login is up; its fix is the password, not
	# "bring it up"
	run -69 rlock -u "$url" --check
	assert_regex "$output" "warn +127\.0\.0\.1:$port sentinel: .*NOAUTH.*; fix: give the sentinels' user and password"
	kill "$pid"
}

@test "a password given to sentinels or a master that have none: 64, one line naming the server" {
	RLOCK_SENTINEL_PASSWORD=Sent1nelPw run -64 --separate-stderr rlock -u "$SENT_URL" -k p -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'sentinel 127\.0\.0\.1:[0-9]+ has no password set, yet rlock was given one'
	RLOCK_PASSWORD=Sent1nelPw run -64 --separate-stderr rlock -u "$SENT_URL" -k p --status
	assert_one_line_error
	assert_regex "$stderr" "127\.0\.0\.1:$MASTER_PORT has no password set, yet rlock was given one \(password from RLOCK_PASSWORD\)"
	[[ ! -e ran && $stderr != *Sent1nelPw* ]]
}

@test "bad Sentinel URLs and options are usage errors" {
	run -64 --separate-stderr rlock -u "redis-sentinel://127.0.0.1:1" -k s -- true
	assert_regex "$stderr" 'missing master name'
	run -64 --separate-stderr rlock -u "redis-sentinel://127.0.0.1:1,/m" -k s -- true
	assert_regex "$stderr" 'empty sentinel address'
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$MASTER_PORT" \
		--sentinel-user u -k s -- true
	assert_regex "$stderr" 'go with a redis-sentinel:// URL'
}
# failover_now: force a failover and wait (bounded) until the former replica is the
# master and every sentinel says so. Sets OLD_PORT and NEW_PORT. The former master
# stays a master for ~10 s more, until a sentinel reconfigures it (it is then a
# replica of the new one).
failover_now() {
	OLD_PORT=$MASTER_PORT
	NEW_PORT=$SENT_REPLICA_PORT
	[[ $NEW_PORT != "$OLD_PORT" ]] || NEW_PORT=$SENT_MASTER_PORT
	# The replica must be in sync first (an earlier failover's former master takes
	# ~10 s to become one).
	wait_until 60 replica_linked "$NEW_PORT"
	"$FAILOVER" "$NEW_PORT" named || fail "no failover to $NEW_PORT took"
	wait_until 30 is_master "$NEW_PORT"
}

@test "failover while held, --wait-replicas 1: the holder goes on on the new master, exit 0" {
	rlock_bg -v -u "$SENT_URL" --wait-replicas 1 -t 3s -k f -- "$HOLD" a
	wait_until 30 test -e a.started
	[[ $(sent_cli "$MASTER_PORT" GET 'rlock:{f}') == "$(env_of a RLOCK_TOKEN)" ]]
	failover_now
	# Renewals reach the new master: its PTTL goes up (the former master still
	# takes writes for a while, but the sentinels say it is no longer the master).
	renewed_reset
	wait_until 30 renewed 2 'rlock:{f}' sent_cli "$NEW_PORT"
	[[ $(sent_cli "$NEW_PORT" GET 'rlock:{f}') == "$(env_of a RLOCK_TOKEN)" ]]
	touch a.release
	rlock_wait "$RLOCK_PID" 30
	cat "$RLOCK_ERR"
	((RLOCK_STATUS == 0))
	[[ $(sent_cli "$NEW_PORT" EXISTS 'rlock:{f}') == 0 ]] # released on the new master
}

@test "failover that lost the lock (key gone on the new master): detected, 79" {
	rlock_bg -u "$SENT_URL" -t 3s -k g -- "$HOLD" b
	wait_until 30 test -e b.started
	failover_now
	# What asynchronous replication can lose: the new master never got the key.
	sent_cli "$NEW_PORT" DEL 'rlock:{g}' >/dev/null
	rlock_wait "$RLOCK_PID" 30
	cat "$RLOCK_ERR"
	((RLOCK_STATUS == 79))
	grep -q 'lost' "$RLOCK_ERR"
	[[ ! -e b.end ]] # the command was stopped, not left to finish
}


@test "failover that lost the lock, the command done before its first renewal: the release asks the sentinels, finds it gone, 79" {
	local old new
	old=$MASTER_PORT new=$SENT_REPLICA_PORT
	[[ $new != "$old" ]] || new=$SENT_MASTER_PORT
	wait_until 60 replica_linked "$new"
	# The command asks for the failover and waits until every sentinel names the new
	# master; the lock is not there (what asynchronous replication can lose), so a
	# second run takes it there; then the command ends, long before its first renewal
	# (the ttl is long). The former master still answers as one and still has the
	# token: a release sent there would say "released", 0 (it did).
	run --separate-stderr rlock -v -u "$SENT_URL" -t 300s -k lr -- sh -c "
		'$FAILOVER' $new named || exit 9
		redis-cli -p $new DEL 'rlock:{lr}' >/dev/null
		'$RLOCK' -u $SENT_URL -n -k lr -- touch second-ran
		redis-cli -p $old ROLE | head -1 >old-role"
	echo "# the former master's role as the command ended: $(cat old-role 2>/dev/null)" >&3
	((status != 9)) || fail "no failover to $new took (6 requests), or no second run: $stderr"
	[[ -e second-ran ]] || fail "the second run did not get the lock: $stderr"
	((status == 79)) || fail "exit $status, not 79: $stderr"
	assert_regex "$stderr" 'lock lost: it was no longer held when the command ended'
	assert_regex "$stderr" "the sentinels name a new master for '$SENT_MASTER'"
}


# blpop_on PORT: a client blocked in BLPOP (a waiter's place) on the server at PORT.
blpop_on() { (($(sent_cli "$1" CLIENT LIST | grep -c ' flags=b .* cmd=blpop ') >= 1)); }

@test "a waiter whose sentinel's ACL refuses SUBSCRIBE +switch-master: said once at -v, not asked again" {
	local port dir pid
	# A fourth sentinel, alone, whose default user may not SUBSCRIBE.
	port=$(free_port)
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/sentinel.XXXXXX")
	printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 1\n' \
		"$port" "$dir" "$SENT_MASTER" "$MASTER_PORT" >"$dir/sentinel.conf"
	redis-server "$dir/sentinel.conf" --sentinel </dev/null >"$dir/log" 2>&1 3>&- 4>&- &
	pid=$!
	track_pid "$pid"
	wait_until 30 sh -c "redis-cli -p $port SENTINEL master $SENT_MASTER | grep -q ^flags"
	[[ $(redis-cli -p "$port" ACL SETUSER default -subscribe) == OK ]]
	rlock_bg -u "$SENT_URL" -k wd -- "$HOLD" a
	wait_until 30 test -e a.started
	# Past STORE_WATCH_RETRY_MS (10 s), when a watch that failed is tried again.
	rlock_bg -v -u "redis-sentinel://127.0.0.1:$port/$SENT_MASTER" -w 11500ms -k wd -- true
	rlock_wait "$RLOCK_PID" 30
	assert_equal "$RLOCK_STATUS" 75
	[[ $(grep -c 'failover announcements refused (.*NOPERM.*): not watching' "$RLOCK_ERR") == 1 ]] ||
		fail "$(cat "$RLOCK_ERR")"
	# asked once only: the sentinel's ACL LOG counts the refusals (one entry)
	local log
	log=$(redis-cli -p "$port" ACL LOG)
	[[ $(grep -c '^subscribe$' <<<"$log") == 1 && $(grep -A1 '^count$' <<<"$log" | tail -1) == 1 ]] ||
		fail "refused more than once: $log"
	touch a.release
	kill "$pid"
}

@test "a waiter across a SENTINEL FAILOVER listens on the new master (+switch-master): woken by the release there" {
	local replica=$SENT_REPLICA_PORT
	[[ $replica != "$MASTER_PORT" ]] || replica=$SENT_MASTER_PORT
	wait_until 60 replica_linked "$replica" # --wait-replicas 1 needs it
	rlock_bg -u "$SENT_URL" --wait-replicas 1 -t 120s -k wf -- "$HOLD" a
	local a_pid=$RLOCK_PID
	wait_until 30 test -e a.started
	# -t 120s: the waiter asks the sentinels again by itself only every 30 s
	rlock_bg -vv -u "$SENT_URL" -w 120s -t 120s -k wf -- sh -c 'date +%s%3N >b.start'
	local b_pid=$RLOCK_PID b_err=$RLOCK_ERR
	wait_until 30 blpop_on "$MASTER_PORT"
	# The former master is not reconfigured (as when the sentinels cannot reach it):
	# it answers as a master, keeps the holder's lock and the waiter's place, and
	# hears no release of the new master.
	ACL_RESTORE_PORT=$MASTER_PORT
	sent_cli "$MASTER_PORT" ACL SETUSER default -replicaof -slaveof >/dev/null
	failover_now
	# The sentinels announce the new master: the waiter tries there (busy) and
	# takes a place there.
	wait_until 15 blpop_on "$NEW_PORT"
	touch a.release
	rlock_wait "$a_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	rlock_wait "$b_pid" 30
	assert_equal "$RLOCK_STATUS" 0
	echo "# hand-off after the failover ms: $(($(cat b.start) - $(cat a.end)))" >&3
	grep -q 'woken by the release' "$b_err" || fail "not woken by the release: $(cat "$b_err")"
	sent_cli "$OLD_PORT" ACL SETUSER default +replicaof +slaveof >/dev/null
	ACL_RESTORE_PORT=
}


@test "SENTINEL FAILOVER during the release, --once-per --wait-replicas 1: done on the new master, or said not confirmed (issue 41)" {
	local old new
	old=$MASTER_PORT new=$SENT_REPLICA_PORT
	[[ $new != "$old" ]] || new=$SENT_MASTER_PORT
	wait_until 60 replica_linked "$new"
	# The command asks for the failover and ends once the replica is promoted: the
	# release comes in the second when the sentinels still name the old master and it
	# still answers ROLE master, though no replica follows it any more.
	run --separate-stderr rlock -u "$SENT_URL" --wait-replicas 1 --io-timeout 1s --once-per 1h \
		-k fr -- "$FAILOVER" "$new" promoted
	echo "# $stderr" >&3
	assert_equal "$status" 0
	wait_until 30 sentinels_agree "$new"
	if [[ $stderr != *"not confirmed done (--once-per)"* ]]; then
		# confirmed: then the new master has what the release wrote
		[[ $(sent_cli "$new" EXISTS 'rlock:{fr}:done') == 1 ]] ||
			fail "not said, and the new master has no mark (old $old, new $new)"
		[[ $(sent_cli "$new" EXISTS 'rlock:{fr}') == 0 ]] || fail "the lock lives on the new master"
	fi
}

# Last: it leaves the set without its former master.
@test "the master goes away while held: renewals find the promoted replica, exit 0" {
	local new
	new=$SENT_REPLICA_PORT
	[[ $new != "$MASTER_PORT" ]] || new=$SENT_MASTER_PORT
	wait_until 60 replica_linked "$new"
	rlock_bg -v -u "$SENT_URL" --wait-replicas 1 -t 45s -k d -- "$HOLD" d
	wait_until 30 test -e d.started
	local t0 pid
	t0=$(now_ms)
	pid=$(sent_cli "$MASTER_PORT" INFO server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
	kill -TERM "$pid"
	wait_until 60 sentinels_agree "$new"
	echo "# sentinels named the new master $(($(now_ms) - t0)) ms after it went" >&3
	renewed_reset
	wait_until 40 renewed 1 'rlock:{d}' sent_cli "$new"
	echo "# first renewal on it $(($(now_ms) - t0)) ms after the old one went (lease 45 s)" >&3
	touch d.release
	rlock_wait "$RLOCK_PID" 30
	cat "$RLOCK_ERR"
	((RLOCK_STATUS == 0))
	[[ $(sent_cli "$new" EXISTS 'rlock:{d}') == 0 ]]
}
