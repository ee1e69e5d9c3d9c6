#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154  # quoted $: for the shells the tests start; bats sets $stderr
# --metrics-file PATH (issue 24): the Prometheus text format (node_exporter's textfile
# collector), written when the lock is acquired and at exit, atomically (a temporary
# file renamed over PATH, under an flock of PATH.lock): per lock name the last run's
# wait and hold seconds, exit code, outcome, last run and last success, the renewals and
# failed renewals counted. Every file is checked by test/promcheck.py, a strict parser.

bats_require_minimum_version 1.5.0
load helpers

setup() {
	common_setup
	require_tool python3
	PROMCHECK=$BATS_TEST_DIRNAME/promcheck.py
}

valid() { python3 "$PROMCHECK" "$1" || fail "not valid: $(cat "$1")"; }

# sample FILE SERIES: the value of SERIES (name{labels} as written) in FILE.
sample() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

# outcome FILE KEY: the outcome whose series is 1.
outcome() {
	sed -n "s/^rlock_outcome{key=\"$2\",outcome=\"\\([a-z]*\\)\"} 1\$/\\1/p" "$1"
}

@test "metrics: a run writes a valid file: ran, its exit code, the last success" {
	run -0 "$RLOCK" -k nightly --metrics-file m.prom -- true
	valid m.prom
	[[ $(outcome m.prom nightly) == ran ]]
	[[ $(sample m.prom 'rlock_exit_code{key="nightly"}') == 0 ]]
	[[ $(sample m.prom 'rlock_running{key="nightly"}') == 0 ]]
	local last ok now
	last=$(sample m.prom 'rlock_last_run_timestamp_seconds{key="nightly"}')
	ok=$(sample m.prom 'rlock_last_success_timestamp_seconds{key="nightly"}')
	[[ -n $ok && $ok == "$last" ]]
	now=$(date +%s)
	((${ok%.*} <= now && ${ok%.*} >= now - 600))
	grep -q '^# HELP rlock_wait_seconds ' m.prom
	grep -q '^# TYPE rlock_renewals_total counter$' m.prom
	# a failed run: its exit code, and the last success stays the earlier one
	run -3 "$RLOCK" -k nightly --metrics-file m.prom -- sh -c 'exit 3'
	valid m.prom
	[[ $(outcome m.prom nightly) == ran ]]
	[[ $(sample m.prom 'rlock_exit_code{key="nightly"}') == 3 ]]
	[[ $(sample m.prom 'rlock_last_success_timestamp_seconds{key="nightly"}') == "$ok" ]]
	[[ -z $(find . -name 'm.prom.tmp*') ]] # no temporary file left
}

@test "metrics: written when the lock is acquired (running 1), again at exit" {
	rlock_bg -k job --metrics-file m.prom -- "$HOLD" h
	wait_until 10 test -e h.started
	valid m.prom
	[[ $(sample m.prom 'rlock_running{key="job"}') == 1 ]]
	[[ -n $(sample m.prom 'rlock_wait_seconds{key="job"}') ]]
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 0))
	valid m.prom
	[[ $(sample m.prom 'rlock_running{key="job"}') == 0 ]]
	[[ $(outcome m.prom job) == ran ]]
}

@test "metrics: a keeper's run keeps the wait and hold its keeper wrote when --release ends it (not 0); a --release killed before its release leaves it running" {
	run -0 --separate-stderr "$RLOCK" -k kp --acquire --metrics-file m.prom --events ev.jsonl
	eval "$output"
	wait_until 10 grep -q '"event":"keeper-started"' ev.jsonl
	track_pid "$(sed -n 's/.*"event":"keeper-started".*"pid":\([0-9]*\).*/\1/p' ev.jsonl)"
	local wait
	wait=$(sample m.prom 'rlock_wait_seconds{key="kp"}')
	[[ -n $wait ]]
	[[ $(sample m.prom 'rlock_running{key="kp"}') == 1 ]]
	# killed before its release reaches the server: the keeper holds on, still running
	kill -STOP "$REDIS_PID"
	rlock_bg -k kp --release --io-timeout 20s --metrics-file m.prom
	wait_until 10 eval 'ls -l /proc/$RLOCK_PID/fd 2>/dev/null | grep -q signalfd'
	kill -TERM "$RLOCK_PID"
	rlock_wait
	kill -CONT "$REDIS_PID"
	((RLOCK_STATUS == 143)) || fail "status $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	valid m.prom
	[[ $(sample m.prom 'rlock_running{key="kp"}') == 1 ]] || fail "$(cat m.prom)"
	run -0 "$RLOCK" -k kp --release --metrics-file m.prom
	valid m.prom
	[[ $(outcome m.prom kp) == ran ]]
	[[ $(sample m.prom 'rlock_running{key="kp"}') == 0 ]]
	# the keeper's own figures, written as it stopped: its wait, a hold above 0
	[[ $(sample m.prom 'rlock_wait_seconds{key="kp"}') == "$wait" ]] || fail "$(cat m.prom)"
	[[ $(sample m.prom 'rlock_hold_seconds{key="kp"}') != 0.000 ]] || fail "$(cat m.prom)"
}

@test "metrics: busy, unavailable and lost outcomes; other keys and the last success are kept" {
	run -0 "$RLOCK" -k nightly --metrics-file m.prom -- true
	run -0 "$RLOCK" -k other --metrics-file m.prom -- true
	local ok other
	ok=$(sample m.prom 'rlock_last_success_timestamp_seconds{key="nightly"}')
	other=$(grep 'key="other"' m.prom)
	# busy
	rlock_bg -k nightly -- "$HOLD" h
	wait_until 10 test -e h.started
	run -75 "$RLOCK" -n -k nightly --metrics-file m.prom -- true
	touch h.release
	rlock_wait
	valid m.prom
	[[ $(outcome m.prom nightly) == busy ]]
	[[ $(sample m.prom 'rlock_exit_code{key="nightly"}') == 75 ]]
	[[ $(sample m.prom 'rlock_last_success_timestamp_seconds{key="nightly"}') == "$ok" ]]
	[[ $(grep 'key="other"' m.prom) == "$other" ]]
	# unavailable
	run -69 "$RLOCK" -n -u "redis://127.0.0.1:$(dead_port)" -k nightly --metrics-file m.prom -- true
	valid m.prom
	[[ $(outcome m.prom nightly) == unavailable ]]
	[[ $(sample m.prom 'rlock_exit_code{key="nightly"}') == 69 ]]
	# lost: a frozen server; the failed renewals are counted
	rlock_bg -k nightly -t 3s --io-timeout 300ms --metrics-file m.prom \
		-c 'trap "exit 0" TERM; touch started; while :; do sleep 0.05; done'
	wait_until 10 test -e started
	kill -STOP "$REDIS_PID"
	rlock_wait "$RLOCK_PID" 60
	kill -CONT "$REDIS_PID"
	((RLOCK_STATUS == 79))
	valid m.prom
	[[ $(outcome m.prom nightly) == lost ]]
	[[ $(sample m.prom 'rlock_exit_code{key="nightly"}') == 79 ]]
	(($(sample m.prom 'rlock_renewal_failures_total{key="nightly"}') >= 1))
	[[ $(sample m.prom 'rlock_last_success_timestamp_seconds{key="nightly"}') == "$ok" ]]
	[[ $(grep 'key="other"' m.prom) == "$other" ]]
}

# run_renewed: a run of rn that ends once the server saw two renewals.
run_renewed() {
	rm -f h.release h.started
	rlock_bg -k rn -t 600ms --metrics-file m.prom -- "$HOLD" h
	wait_until 10 test -e h.started
	renewed_reset
	wait_until 30 renewed 2 'rlock:{rn}' rcli
	touch h.release
	rlock_wait
	((RLOCK_STATUS == 0))
}

@test "metrics: renewals are counted, and add up over runs" {
	run_renewed
	local first
	first=$(sample m.prom 'rlock_renewals_total{key="rn"}')
	((first >= 2)) || fail "renewals: $first"
	run_renewed
	valid m.prom
	(($(sample m.prom 'rlock_renewals_total{key="rn"}') >= first + 2))
	[[ $(sample m.prom 'rlock_renewal_failures_total{key="rn"}') == 0 ]]
}

@test "metrics: label values are escaped as the format says" {
	run -0 "$RLOCK" -k 'a"b\c' --metrics-file m.prom -- true
	valid m.prom
	grep -qF 'rlock_exit_code{key="a\"b\\c"} 0' m.prom || fail "$(cat m.prom)"
}

@test "metrics: updated atomically: a reader in a loop never sees a partial file, no writer loses another's series" {
	run -0 "$RLOCK" -k seed --metrics-file m.prom -- true
	python3 "$PROMCHECK" --loop m.prom stop ready >reads 2>reader.err &
	local reader=$! w i
	track_pid "$reader"
	wait_until 30 test -e ready
	for w in 1 2 3; do
		(for i in 1 2 3 4 5; do
			"$RLOCK" -k "w$w-$i" --metrics-file m.prom -- true || exit 1
		done) &
		track_pid $!
		eval "writer$w=$!"
	done
	wait "$writer1" && wait "$writer2" && wait "$writer3"
	touch stop
	local rc=0
	wait "$reader" || rc=$?
	((rc == 0)) || fail "the reader saw a partial or invalid file: $(cat reader.err)"
	echo "# $(cat reads) whole reads while 15 runs wrote the file" >&3
	(($(cat reads) > 0))
	valid m.prom
	for w in 1 2 3; do
		for i in 1 2 3 4 5; do
			[[ $(outcome m.prom "w$w-$i") == ran ]] || fail "w$w-$i lost: $(cat m.prom)"
		done
	done
	[[ $(outcome m.prom seed) == ran ]]
}

@test "metrics: from the config file; a path that cannot be written warns once, the job runs; - is a usage error" {
	printf 'metrics-file = %s\n' "$BATS_TEST_TMPDIR/conf.prom" >conf
	run -0 "$RLOCK" --config conf -k c -- true
	valid conf.prom
	run -0 --separate-stderr "$RLOCK" -k c --metrics-file "$BATS_TEST_TMPDIR/no/dir/m.prom" -- echo ran
	[[ $output == ran ]]
	[[ $(grep -c 'metrics file' <<<"$stderr") == 1 ]] || fail "stderr: $stderr"
	run -64 --separate-stderr "$RLOCK" -k c --metrics-file - -- true
	assert_one_line_error
}

# recipe NAME: the fenced block of docs/operations.md after <!-- recipe:NAME -->.
recipe() {
	sed -n "/^<!-- recipe:$1 -->\$/,\$p" "$RLOCK_SOURCE_DIR/docs/operations.md" |
		sed -n '2,/^```$/p' | sed '1d;$d'
}

@test "metrics: the recipe of docs/operations.md: the cron line records a success the alert rule sees, a busy host keeps it" {
	python3 -c 'import yaml' 2>/dev/null || ci_skip "python3-yaml is not installed"
	require_tool jq
	local line cmd ok
	line=$(recipe metrics-cron)
	[[ -n $line ]] || fail "docs/operations.md: no metrics-cron recipe"
	read -r _ _ _ _ _ cmd <<<"$line"
	cmd=${cmd//\/var\/lib\/node_exporter\/textfile/$BATS_TEST_TMPDIR}
	cmd=${cmd//\/var\/log\/rlock/$BATS_TEST_TMPDIR}
	cmd=${cmd//\/usr\/local\/bin\/backup.sh/true}
	mkdir -p bin
	ln -sf "$RLOCK" bin/rlock
	PATH=$PWD/bin:$PATH run -0 sh -c "$cmd"
	valid rlock.prom
	[[ $(outcome rlock.prom nightly) == ran ]]
	ok=$(sample rlock.prom 'rlock_last_success_timestamp_seconds{key="nightly"}')
	# the rule names that series, and it does not fire now; it would 27 hours later
	recipe metrics-alert >rules.yml
	run -0 python3 -c '
import sys, time, yaml
rules = [r for g in yaml.safe_load(open("rules.yml"))["groups"] for r in g["rules"]]
assert len(rules) == 2, rules
assert all("rlock_last_success_timestamp_seconds{key=\"nightly\"}" in r["expr"] for r in rules)
assert "> 26*3600" in rules[0]["expr"], rules[0]["expr"]
last = float(sys.argv[1])
print(time.time() - last > 26 * 3600, time.time() + 27 * 3600 - last > 26 * 3600)' "$ok"
	[[ $output == "False True" ]] || fail "$output"
	# another host, the same minute: busy, skipped (-E 0); the success stays
	rlock_bg -k nightly -- "$HOLD" h
	wait_until 10 test -e h.started
	PATH=$PWD/bin:$PATH run -0 sh -c "$cmd"
	touch h.release
	rlock_wait
	valid rlock.prom
	[[ $(outcome rlock.prom nightly) == busy ]]
	[[ $(sample rlock.prom 'rlock_last_success_timestamp_seconds{key="nightly"}') == "$ok" ]]
	[[ $(jq -r .event events.jsonl | tr '\n' ' ') == "acquired released busy " ]]
}

@test "metrics: every series of a large file is kept (2,000 names, 22,000 samples read back whole, issue 33)" {
	python3 - <<'PY'
with open('m.prom', 'w') as f:
    f.write('# HELP rlock_exit_code Exit status of the last run.\n# TYPE rlock_exit_code gauge\n')
    for i in range(2000):
        f.write(''.join('rlock_exit_code{key="job%d",n="%d"} 0\n' % (i, j) for j in range(11)))
PY
	run -0 "$RLOCK" -k new --metrics-file m.prom -- true
	valid m.prom
	[[ $(grep -c '^rlock_exit_code{key="job' m.prom) == 22000 ]] ||
		fail "series lost: $(grep -c '^rlock_exit_code{key="job' m.prom) of 22000 left"
	grep -q '^rlock_exit_code{key="job1999",n="10"} 0$' m.prom
	[[ $(outcome m.prom new) == ran ]]
}

@test "metrics: a file that is not rlock's metrics, a link, another user's file: not replaced, one warning, the job runs (issue 33)" {
	printf 'root:x:0:0:root:/root:/bin/bash\n' >passwd
	cp passwd passwd.orig
	run -0 --separate-stderr "$RLOCK" -k m --metrics-file passwd -- echo ran
	[[ $output == ran ]]
	[[ $(grep -c 'metrics file' <<<"$stderr") == 1 && $stderr == *"not rlock's metrics"* ]] ||
		fail "stderr: $stderr"
	cmp passwd passwd.orig
	# A link planted at the name: neither followed nor replaced.
	ln -s "$PWD/passwd" link.prom
	run -0 --separate-stderr "$RLOCK" -k m --metrics-file link.prom -- echo ran
	[[ $stderr == *"symbolic link"* ]] || fail "stderr: $stderr"
	[[ -L link.prom ]] && cmp passwd passwd.orig
	if ((EUID == 0)); then
		run -0 "$RLOCK" -k m --metrics-file other.prom -- true
		chown nobody other.prom
		cp other.prom other.orig
		run -0 --separate-stderr "$RLOCK" -k m2 --metrics-file other.prom -- true
		[[ $stderr == *"another user"* ]] || fail "stderr: $stderr"
		cmp other.prom other.orig
	fi
}
