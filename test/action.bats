#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154,SC2016  # bats sets $output, $stderr, $lines; quoted ` and $
# The GitHub Action (action.yml, action/*.js): its main and post steps run under `node`
# as a runner runs them (INPUT_* variables, with the hyphens of their names; the files
# GITHUB_OUTPUT, GITHUB_STATE, GITHUB_ENV, GITHUB_STEP_SUMMARY; STATE_* for the post
# step), against this file's redis-server, which wants a password (the action's
# `password` input, which must never reach a command line).

load helpers

# The server's password (helpers.bash unsets REDISCLI_AUTH): rcli's and the tests'
# own rlock's; the steps get it only as the action's password input.
export REDISCLI_AUTH=action-test-password

setup_file() {
	RLOCK=$(readlink -f "$RLOCK") # the steps run elsewhere: RLOCK=build/rlock works too
	export RLOCK
	common_setup_file --unix --requirepass "$REDISCLI_AUTH"
}

setup() {
	require_tool node
	common_setup
	mkdir -p bin
	ln -sf "$RLOCK" bin/rlock
}

teardown() {
	local k p
	# A keeper a failed test left: by the pid its lock names (the server is the test's).
	for k in $(rcli KEYS '*:owner'); do
		p=$(rcli HGET "$k" pid)
		[[ $p =~ ^[0-9]+$ && $(cat "/proc/$p/comm" 2>/dev/null) == rlock-keeper ]] &&
			kill -TERM "$p" 2>/dev/null
	done
	common_teardown
}

# new_job NAME: a job's directory (its runner files, RUNNER_TEMP), run id NAME.
new_job() {
	mkdir -p "$1"
	: >"$1/output"
	: >"$1/state"
	: >"$1/env"
	: >"$1/summary"
}

# step JOB main|post [NAME=VALUE...]: set STEP to the command that runs that step of
# JOB as the runner would: its files, the run's URL, inputs key=deploy, url and
# password unless given (NAME=VALUE: INPUT_WAIT=0, INPUT_ON-CONFLICT=skip, PATH=...);
# the post step also gets JOB's saved state as STATE_* variables.
step() {
	local job=$BATS_TEST_TMPDIR/$1 which=$2 line
	shift 2
	STEP=(env -C "$job" -u REDISCLI_AUTH "PATH=$BATS_TEST_TMPDIR/bin:$PATH"
		"GITHUB_OUTPUT=$job/output" "GITHUB_STATE=$job/state" "GITHUB_ENV=$job/env"
		"GITHUB_STEP_SUMMARY=$job/summary" "RUNNER_TEMP=$job"
		GITHUB_ACTIONS=true GITHUB_SERVER_URL=https://github.example GITHUB_REPOSITORY=acme/app
		"GITHUB_RUN_ID=${job##*/}" INPUT_KEY=deploy "INPUT_URL=$REDIS_URL"
		"INPUT_PASSWORD=$REDISCLI_AUTH")
	if [[ $which == post ]]; then
		# NAME=VALUE, or NAME<<DELIMITER, the value's lines, DELIMITER (as the runner reads).
		local name delim value
		while IFS= read -r line; do
			if [[ $line =~ ^([A-Za-z_][A-Za-z0-9_]*)\<\<(.+)$ ]]; then
				name=${BASH_REMATCH[1]} delim=${BASH_REMATCH[2]} value=
				while IFS= read -r line && [[ $line != "$delim" ]]; do
					value+=${value:+$'\n'}$line
				done
				STEP+=("STATE_$name=$value")
			else
				STEP+=("STATE_$line")
			fi
		done <"$job/state"
	fi
	STEP+=("$@" node "$RLOCK_SOURCE_DIR/action/$which.js")
}

# step_bg JOB main|post [NAME=VALUE...]: that step in the background; STEP_PID (node),
# its output in JOB/WHICH.out and JOB/WHICH.err.
step_bg() {
	local job=$1 which=$2
	step "$@"
	(clean_exec "${STEP[@]}") >"$job/$which.out" 2>"$job/$which.err" &
	STEP_PID=$!
	track_pid "$STEP_PID"
}

# job_var JOB FILE NAME: NAME's value in JOB's runner file (output, state, env).
job_var() { sed -n "s/^$3=//p" "$BATS_TEST_TMPDIR/$1/$2"; }

# waiting N: N rlocks wait for the lock deploy.
waiting() { [[ $(waiters deploy) == "$1" ]]; }

# A later step of JOB (a `run:`): its environment has what GITHUB_ENV received, and
# neither the tests' server (REDIS_URL) nor their password.
# shellcheck disable=SC2046  # the KEY=VALUE lines of GITHUB_ENV, one word each
job_shell() {
	local job=$1
	shift
	env -C "$BATS_TEST_TMPDIR/$job" -u REDISCLI_AUTH -u REDIS_URL "PATH=$BATS_TEST_TMPDIR/bin:$PATH" \
		$(cat "$BATS_TEST_TMPDIR/$job/env") bash -c "$@"
}

# took_nothing JOB: JOB's main step left the post step nothing to release (no state
# but the connection's directory, which is gone already).
took_nothing() {
	local dir
	! grep -qv '^conn=' "$BATS_TEST_TMPDIR/$1/state" || fail "state: $(cat "$BATS_TEST_TMPDIR/$1/state")"
	dir=$(job_var "$1" state conn)
	[[ -z $dir || ! -e $dir ]] || fail "left: $dir"
}

# no_password FILE...: none of FILEs holds the password, but in the ::add-mask:: line.
no_password() {
	local f
	for f; do
		! grep -v '^::add-mask::' "$f" | grep -qF "$REDISCLI_AUTH" || fail "the password is in $f: $(cat "$f")"
	done
}

@test "action: the main step takes the lock, masks the token before printing anything, sets outputs, RLOCK_* and the summary; post releases" {
	new_job job1
	step job1 main
	run -0 --separate-stderr "${STEP[@]}"
	local token
	token=$(rcli GET 'rlock:{deploy}')
	[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "not held: $token"
	# The runner hides the password and the token from the first lines on: nothing
	# shows them before.
	assert_equal "${lines[0]}" "::add-mask::$REDISCLI_AUTH"
	assert_equal "${lines[1]}" "::add-mask::$token"
	[[ $(printf '%s\n%s\n' "$output" "$stderr" | grep -v '^::add-mask::' | grep -c "$token") == 0 ]] ||
		fail "the token is printed: $output $stderr"
	[[ $(printf '%s\n%s\n' "$output" "$stderr" | grep -v '^::add-mask::' | grep -c "$REDISCLI_AUTH") == 0 ]] ||
		fail "the password is printed"
	assert_equal "$(job_var job1 output acquired)" true
	assert_equal "$(job_var job1 output fence)" 1
	[[ $(job_var job1 output waited-seconds) =~ ^[0-9]+\.[0-9]$ ]] || fail "$(cat job1/output)"
	assert_equal "$(job_var job1 env RLOCK_TOKEN)" "$token"
	assert_equal "$(job_var job1 env RLOCK_KEY)" 'rlock:{deploy}'
	grep -q '^https://github.example/acme/app/actions/runs/job1 took `deploy` after [0-9.]* s (fence 1)$' \
		job1/summary || fail "summary: $(cat job1/summary)"
	# The keeper: labelled with the run's URL, no password on its command line.
	run -75 rlock -k deploy --status
	assert_output --partial 'label    https://github.example/acme/app/actions/runs/job1'
	local keeper
	keeper=$(rcli HGET 'rlock:{deploy}:owner' pid)
	proc_alive "$keeper"
	! tr '\0' ' ' <"/proc/$keeper/cmdline" | grep -qF "$REDISCLI_AUTH" || fail "password on argv"
	# A later step sees the lock's variables: `rlock --held` says it is held.
	job_shell job1 'rlock --held'
	step job1 post
	run -0 --separate-stderr "${STEP[@]}"
	assert_output --regexp "^rlock: released 'deploy' after [0-9.]+ s$"
	key_absent 'rlock:{deploy}' || fail "not released"
	wait_until 10 proc_gone "$keeper"
}

@test "action: later steps reach the server of the url and password inputs (--held, a nested rlock at once); the password is in no runner file, log, environment or argv; the post step removes its files (issue 38)" {
	new_job job1
	# The job's own RLOCK_URL names another server: the url input wins, in later steps too.
	local elsewhere
	elsewhere=redis://127.0.0.1:$(dead_port)
	step job1 main "RLOCK_URL=$elsewhere"
	"${STEP[@]}" >job1/main.out 2>job1/main.err || fail "main: $(cat job1/main.*)"
	local token conf
	token=$(job_var job1 state token)
	# A later step (the job's environment, then what GITHUB_ENV gave it): --held says
	# yes, a nested rlock runs its command at once (-n: it would say busy, not wait).
	RLOCK_URL=$elsewhere run -0 --separate-stderr job_shell job1 'rlock --held'
	local t0
	t0=$(date +%s%3N)
	run -0 --separate-stderr job_shell job1 'timeout 20 rlock -k deploy -n -- echo nested ran'
	assert_output 'nested ran'
	(($(date +%s%3N) - t0 < 10000)) || fail "the nested rlock took $(($(date +%s%3N) - t0)) ms"
	assert_equal "$(rcli GET 'rlock:{deploy}')" "$token"
	assert_equal "$(grep -c '^RLOCK_URL=$' job1/env)" 1 # (the job's RLOCK_URL emptied)
	# They got RLOCK_CONFIG (a 0600 file of the job's, naming a 0600 password
	# file), not the password.
	conf=$(job_var job1 env RLOCK_CONFIG)
	[[ -f $conf && $(stat -c %a "$conf") == 600 ]] || fail "RLOCK_CONFIG: '$conf' $(cat job1/env)"
	local pwfile
	pwfile=$(sed -n 's/^password-file = //p' "$conf")
	[[ $(stat -c %a "$pwfile") == 600 && $(stat -c %a "$(dirname "$conf")") == 700 ]] || fail "modes"
	# The keeper (it outlives the step) has no password in its environment or argv.
	local keeper
	keeper=$(rcli HGET 'rlock:{deploy}:owner' pid)
	proc_alive "$keeper"
	! tr '\0' '\n' <"/proc/$keeper/environ" | grep -qF "$REDISCLI_AUTH" || fail "password in the keeper's environment"
	! tr '\0' ' ' <"/proc/$keeper/cmdline" | grep -qF "$REDISCLI_AUTH" || fail "password on argv"
	step job1 post "RLOCK_URL=$elsewhere"
	"${STEP[@]}" >job1/post.out 2>job1/post.err || fail "post: $(cat job1/post.*)"
	key_absent 'rlock:{deploy}' || fail "not released"
	no_password job1/env job1/output job1/state job1/summary job1/main.out job1/main.err job1/post.out job1/post.err
	grep -qx "::add-mask::$REDISCLI_AUTH" job1/main.out || fail "the password is not masked: $(cat job1/main.out)"
	# The post step removed the config and password files.
	[[ ! -e $conf && ! -e $pwfile && ! -e $(dirname "$conf") ]] || fail "left: $(ls -la "$(dirname "$conf")")"
	# No other file of the job's holds it (main.out: only its mask, checked above).
	local left
	left=$(grep -rlF --exclude=main.out "$REDISCLI_AUTH" job1) && fail "the password is left in $left"
	true
}

@test "action: a second job waits, gets the lock after the first job's post step, and its summary says for whom it waited" {
	new_job job1
	new_job job2
	step job1 main
	run -0 "${STEP[@]}"
	step_bg job2 main
	local job2=$STEP_PID
	wait_until 30 waiting 1 || fail "$(cat job2/main.*)"
	proc_alive "$job2" || fail "job2 did not wait: $(cat job2/main.out job2/main.err)"
	step job1 post
	run -0 "${STEP[@]}"
	rlock_wait "$job2" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(job_var job2 output fence)" 2
	assert_equal "$(rcli GET 'rlock:{deploy}')" "$(job_var job2 state token)"
	grep -qE '^https://github.example/acme/app/actions/runs/job2 waited [0-9]+\.[0-9] s for https://github.example/acme/app/actions/runs/job1, then took `deploy` \(fence 2\)$' \
		job2/summary || fail "summary: $(cat job2/summary)"
	step job2 post
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}'
}

@test "action: a failing middle step and a cancelled one (SIGTERM): the post step (always) still releases" {
	local job
	for job in failed cancelled; do
		new_job $job
		step $job main
		run -0 "${STEP[@]}"
		key_exists 'rlock:{deploy}'
		if [[ $job == failed ]]; then
			run -3 job_shell $job 'exit 3'
		else
			# The runner cancels the job: SIGTERM to the step that runs.
			(clean_exec bash -c 'echo $$ >step.pid; exec sleep 600') &
			local pid=$!
			track_pid "$pid"
			wait_until 10 test -s step.pid
			kill -TERM "$pid"
			rlock_wait "$pid" 10
		fi
		step $job post
		run -0 "${STEP[@]}"
		key_absent 'rlock:{deploy}' || fail "$job: not released"
	done
}

@test "action: a job cancelled while its main step waits gives up (no lock, no keeper left), its post step does nothing" {
	new_job job1
	new_job job2
	step job1 main
	run -0 "${STEP[@]}"
	local token
	token=$(rcli GET 'rlock:{deploy}')
	step_bg job2 main
	local job2=$STEP_PID
	wait_until 30 waiting 1
	kill -TERM "$job2"
	rlock_wait "$job2" 30
	assert_equal "$RLOCK_STATUS" 1
	grep -q "^::error::cancelled (SIGTERM) while taking the lock 'deploy'$" job2/main.out ||
		fail "$(cat job2/main.out)"
	wait_until 30 waiting 0
	assert_equal "$(job_var job2 output acquired)" false
	took_nothing job2
	step job2 post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	assert_equal "$(rcli GET 'rlock:{deploy}')" "$token"
	step job1 post
	run -0 "${STEP[@]}"
}

@test "action: a lock name and a label that start with '-' (as rlock's options do) are taken as the values they are" {
	new_job dash
	step dash main INPUT_KEY=-n1 INPUT_LABEL=-v2 INPUT_WAIT=5s
	run -0 --separate-stderr "${STEP[@]}"
	assert_equal "$(job_var dash output acquired)" true
	run -75 rlock --key=-n1 --status
	assert_output --partial 'label    -v2'
	step dash post INPUT_KEY=-n1
	run -0 --separate-stderr "${STEP[@]}"
	key_absent 'rlock:{-n1}'
}

@test "action: on-conflict skip: a busy lock skips (step succeeds, acquired=false); fail (default) fails the step" {
	new_job holder
	new_job skipper
	new_job failer
	step holder main
	run -0 "${STEP[@]}"
	step skipper main INPUT_WAIT=0 INPUT_ON-CONFLICT=skip
	run -0 --separate-stderr "${STEP[@]}"
	assert_equal "${lines[0]}" "::add-mask::$REDISCLI_AUTH"
	assert_line --index 1 --regexp '^::notice::`deploy` is busy \(held by https://github.example/acme/app/actions/runs/holder\): https://github.example/acme/app/actions/runs/skipper skipped it after [0-9.]+ s$'
	assert_equal "$(job_var skipper output acquired)" false
	assert_equal "$(job_var skipper output fence)" ''
	grep -q 'skipped it' skipper/summary
	took_nothing skipper
	[[ ! -s skipper/env ]]
	step skipper post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	step failer main INPUT_WAIT=200ms
	run -1 --separate-stderr "${STEP[@]}"
	assert_line --index 1 --regexp '^::error::`deploy` is busy .* gave up after [0-9.]+ s$'
	assert_equal "$(job_var failer output acquired)" false
	step holder post
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}'
}

@test "action: a lock lost during the job, or given up at max-hold, fails the post step with the reason" {
	new_job lost
	step lost main INPUT_TTL=3s
	run -0 "${STEP[@]}"
	# Another client takes it over; the keeper finds out at its next renewal.
	rcli SET 'rlock:{deploy}' thief PX 600000 >/dev/null
	local log
	log=$(job_var lost state log)
	wait_until 30 grep -q 'lock lost' "$log"
	step lost post
	run -1 --separate-stderr "${STEP[@]}"
	assert_output --regexp "^::error::the lock 'deploy' was no longer held at the end of the job \(taken [0-9.]+ s ago\): lock lost: .*"
	grep -q 'lock lost' lost/summary
	assert_equal "$(rcli GET 'rlock:{deploy}')" thief
	rcli DEL 'rlock:{deploy}' >/dev/null
	new_job maxhold
	step maxhold main INPUT_MAX-HOLD=1s
	run -0 "${STEP[@]}"
	log=$(job_var maxhold state log)
	wait_until 30 grep -q 'max-hold is over' "$log"
	step maxhold post
	run -1 --separate-stderr "${STEP[@]}"
	assert_output --regexp "^::error::the lock 'deploy' was no longer held at the end of the job \(taken [0-9.]+ s ago\): --max-hold is over"
}

@test "action: a main step that never took the lock (server down, bad input) leaves a post step that does nothing, quietly" {
	new_job down
	step down main "INPUT_URL=redis://127.0.0.1:$(dead_port)" INPUT_WAIT=1s # the wait rides out a server that is down
	run -1 --separate-stderr "${STEP[@]}"
	assert_line --index 1 --regexp "^::error::rlock --acquire of 'deploy' failed \(exit 69\)"
	step down post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	new_job bad
	step bad main 'INPUT_MODE=limit'
	run -1 --separate-stderr "${STEP[@]}"
	assert_output "::error::rlock: mode: 'limit' is not exclusive, shared, limit N or fair"
	step bad post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]]
}

@test "action: mode shared lets two jobs hold the lock; limit 1 turns the second away" {
	new_job a
	new_job b
	step a main INPUT_MODE=shared
	run -0 "${STEP[@]}"
	step b main INPUT_MODE=shared INPUT_WAIT=0
	run -0 "${STEP[@]}"
	run -75 rlock -k deploy --status
	assert_output --partial 'shared'
	step a post
	run -0 "${STEP[@]}"
	step b post
	run -0 "${STEP[@]}"
	new_job c
	new_job d
	step c main 'INPUT_MODE=limit 1'
	run -0 "${STEP[@]}"
	step d main 'INPUT_MODE=limit 1' INPUT_WAIT=0
	run -1 "${STEP[@]}"
	step c post
	run -0 "${STEP[@]}"
}

# build_stubs [MISSING-PACKAGE...]: a PATH (stub/) with node and stubs of what the
# build uses: a cmake that records its arguments and "builds" by copying the binary
# under test; cc and pkg-config; a dpkg-query that knows every package but MISSING;
# a sudo and an apt-get that record their arguments (and DEBIAN_FRONTEND).
build_stubs() {
	mkdir stub
	ln -s "$(command -v node)" stub/node
	ln -s "$(command -v env)" stub/env
	cat >stub/cmake <<EOF
#!/bin/bash
echo "\$*" >>$BATS_TEST_TMPDIR/cmake.log
if [[ \$1 == --build ]]; then /bin/cp "$RLOCK" "\$2/rlock"; else /bin/mkdir -p "\$4"; fi
EOF
	printf '#!/bin/sh\nexit 0\n' >stub/cc
	cp stub/cc stub/pkg-config
	cat >stub/dpkg-query <<EOF
#!/bin/bash
for p in $*; do [[ \${!#} == "\$p" ]] && exit 1; done
printf 'install ok installed'
EOF
	cat >stub/sudo <<EOF
#!/bin/bash
echo "sudo \$*" >>$BATS_TEST_TMPDIR/sudo.log
[[ \$1 == -n ]] && shift
exec "\$@"
EOF
	cat >stub/apt-get <<EOF
#!/bin/bash
echo "apt-get \$* (DEBIAN_FRONTEND=\$DEBIAN_FRONTEND)" >>$BATS_TEST_TMPDIR/apt.log
exit \${APT_STATUS:-0}
EOF
	chmod +x stub/*
}

@test "action: without an rlock on the PATH the main step builds this checkout with cmake" {
	new_job build
	build_stubs
	step build main "PATH=$PWD/stub"
	run -0 --separate-stderr "${STEP[@]}"
	local dir=$PWD/build/rlock-action-build
	assert_equal "$(sed -n 1p cmake.log)" "-S $RLOCK_SOURCE_DIR -B $dir -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF"
	assert_equal "$(sed -n 2p cmake.log)" "--build $dir --target rlock --parallel"
	assert_equal "$(job_var build state rlock)" "$dir/rlock"
	# All it needs is there: nothing installed.
	[[ ! -e apt.log && ! -e sudo.log ]] || fail "installed: $(cat apt.log sudo.log)"
	step build post "PATH=$PWD/stub"
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}'
}

@test "action: on a runner as it comes (no hiredis or OpenSSL headers), the main step installs them with apt-get, non-interactively, through sudo unless root, then builds (issue 38)" {
	new_job build
	build_stubs libhiredis-dev libssl-dev
	local sudo=''
	((UID == 0)) || sudo='sudo -n '
	step build main "PATH=$PWD/stub"
	run -0 --separate-stderr "${STEP[@]}"
	assert_equal "$(cat apt.log)" "apt-get -q update (DEBIAN_FRONTEND=noninteractive)
apt-get -q -y --no-install-recommends install libhiredis-dev libssl-dev (DEBIAN_FRONTEND=noninteractive)"
	if [[ -n $sudo ]]; then
		assert_equal "$(sed -n 2p sudo.log)" 'sudo -n env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends install libhiredis-dev libssl-dev'
	else
		[[ ! -e sudo.log ]] || fail "root, yet sudo: $(cat sudo.log)"
	fi
	assert_line "rlock: ${sudo}env DEBIAN_FRONTEND=noninteractive apt-get -q -y --no-install-recommends install libhiredis-dev libssl-dev"
	[[ $(wc -l <cmake.log) == 2 ]] || fail "cmake: $(cat cmake.log)"
	step build post "PATH=$PWD/stub"
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}'
	# An install that fails ends the step with the command and its status; no build.
	new_job failed
	rm -f apt.log cmake.log
	step failed main "PATH=$PWD/stub" APT_STATUS=100
	run -1 --separate-stderr "${STEP[@]}"
	assert_line "::error::rlock: ${sudo}env DEBIAN_FRONTEND=noninteractive apt-get -q update: exit 100"
	[[ ! -e cmake.log ]] || fail "built anyway: $(cat cmake.log)"
	key_absent 'rlock:{deploy}'
	# No apt-get (not Debian or Ubuntu): one line says what to install.
	new_job noapt
	rm stub/apt-get
	step noapt main "PATH=$PWD/stub"
	run -1 --separate-stderr "${STEP[@]}"
	assert_line '::error::rlock: building rlock needs libhiredis-dev, libssl-dev: install them, or put rlock on the PATH'
}

@test "--acquire --format github on a GitHub runner prints ::add-mask::TOKEN on stderr before the token (elsewhere, or sh format: not)" {
	run -0 env GITHUB_ACTIONS=true bash -c '"$RLOCK" -k deploy --acquire --format github 2>&1'
	[[ ${lines[1]} == RLOCK_KEY=* ]] || fail "$output"
	assert_equal "${lines[0]}" "::add-mask::${lines[2]#RLOCK_TOKEN=}"
	RLOCK_TOKEN=${lines[2]#RLOCK_TOKEN=} run -0 rlock -k deploy --release
	# Not on a GitHub runner (a GitLab log would show the token), nor for sh.
	run -0 env -u GITHUB_ACTIONS bash -c '"$RLOCK" -k deploy --acquire --format github 2>&1'
	refute_output --partial '::add-mask::'
	RLOCK_TOKEN=${lines[1]#RLOCK_TOKEN=} run -0 rlock -k deploy --release
	run -0 env GITHUB_ACTIONS=true bash -c '"$RLOCK" -k deploy --acquire 2>&1'
	refute_output --partial '::add-mask::'
	eval "$output"
	run -0 rlock -k deploy --release
}

# own_lines FILE: every line of a step's stdout is one of the action's own: a workflow
# command it sends (add-mask, notice, error, group) or a line starting "rlock: ".
own_lines() {
	local line
	while IFS= read -r line; do
		[[ $line =~ ^::(add-mask|notice|error|group|endgroup):: || $line == 'rlock: '* ]] ||
			fail "a line the action did not mean to print: $line"
	done <"$1"
	! grep -q $'\e' "$1" || fail "a terminal escape on stdout: $(cat -v "$1")"
}

@test "action: another holder's label (line breaks, workflow commands, escapes, Markdown) is printed as one plain line and Markdown-safe in the summary (issue 33)" {
	local evil=$'evil\n::warning::pwned\n::stop-commands::tok\n::add-mask::rlock\e[31m ![x](https://evil.example/p.png) <img src=x> [click](https://evil.example)'
	new_job holder
	new_job skipper
	new_job waiter
	step holder main "INPUT_LABEL=$evil"
	run -0 "${STEP[@]}"
	step skipper main INPUT_WAIT=0 INPUT_ON-CONFLICT=skip
	"${STEP[@]}" >skipper/main.out 2>skipper/main.err || fail "skipper: $(cat skipper/main.*)"
	own_lines skipper/main.out
	grep -qF '(held by evil\x0a::warning::pwned\x0a::stop-commands::tok\x0a::add-mask::rlock\x1b[31m' skipper/main.out ||
		fail "$(cat skipper/main.out)"
	# The summary: no image, link or tag that renders; the text is all there, escaped.
	! grep -qE '!\[|<img|\]\(' skipper/summary || fail "summary: $(cat skipper/summary)"
	grep -qF '\!\[x\]\(https://evil.example/p.png\) &lt;img src=x&gt;' skipper/summary ||
		fail "summary: $(cat skipper/summary)"
	# A job that waited for it says so the same way, on stdout and in its summary.
	step_bg waiter main
	local waiter=$STEP_PID
	wait_until 30 waiting 1 || fail "$(cat waiter/main.*)"
	step holder post
	run -0 "${STEP[@]}"
	rlock_wait "$waiter" 30
	assert_equal "$RLOCK_STATUS" 0
	own_lines waiter/main.out
	grep -q 'waited .* for evil\\x0a::warning::pwned' waiter/main.out || fail "$(cat waiter/main.out)"
	! grep -qE '!\[|<img|\]\(' waiter/summary || fail "summary: $(cat waiter/summary)"
	step waiter post
	run -0 "${STEP[@]}"
}

@test "action: cacert, cert and tls-key inputs reach a rediss:// server with a private CA that asks for a client certificate, in later steps too; without cacert the error hints at it (issue 38)" {
	tls_make_certs "$BATS_TEST_TMPDIR/certs"
	tls_redis_start --tls-auth-clients yes --requirepass "$REDISCLI_AUTH"
	local url="rediss://127.0.0.1:$TLS_PORT" c=$TLS_CERTS
	new_job tls
	# The password in the URL this time (a secret RLOCK_URL): masked, and in no file
	# of the job's but the 0600 config file, which the post step removes.
	step tls main "INPUT_URL=rediss://default:$REDISCLI_AUTH@127.0.0.1:$TLS_PORT" INPUT_PASSWORD= \
		"INPUT_CACERT=$c/ca.pem" "INPUT_CERT=$c/client.pem" "INPUT_TLS-KEY=$c/client.key"
	"${STEP[@]}" >tls/main.out 2>tls/main.err || fail "main: $(cat tls/main.*)"
	assert_equal "$(head -n 1 tls/main.out)" "::add-mask::$REDISCLI_AUTH"
	local conf
	conf=$(job_var tls env RLOCK_CONFIG)
	[[ $(stat -c %a "$conf") == 600 ]] || fail "config mode $(stat -c %a "$conf")"
	local token
	token=$(job_var tls state token)
	assert_equal "$(tls_cli "$TLS_PORT" --no-auth-warning -a "$REDISCLI_AUTH" GET 'rlock:{deploy}')" "$token"
	run -0 --separate-stderr job_shell tls 'rlock --held'
	run -0 --separate-stderr job_shell tls 'timeout 20 rlock -k deploy -n -- echo nested ran'
	assert_output 'nested ran'
	step tls post "INPUT_URL=$url"
	"${STEP[@]}" >tls/post.out 2>tls/post.err || fail "post: $(cat tls/post.*)"
	assert_equal "$(tls_cli "$TLS_PORT" --no-auth-warning -a "$REDISCLI_AUTH" EXISTS 'rlock:{deploy}')" 0
	no_password tls/env tls/output tls/state tls/main.out tls/main.err tls/post.out tls/post.err
	[[ ! -e $conf ]] || fail "the config file is left"
	# No cacert: the system's trust store does not know the CA; the message says what to do.
	new_job nocacert
	step nocacert main "INPUT_URL=$url" "INPUT_CERT=$c/client.pem" "INPUT_TLS-KEY=$c/client.key" INPUT_WAIT=1s
	run -1 --separate-stderr "${STEP[@]}"
	assert_regex "$stderr" 'certificate verify failed \(.*\); a private CA\? name its certificate with --cacert FILE$'
	assert_line "::error::rlock --acquire of 'deploy' failed (exit 69): see its message above"
	# The step that took nothing left no files behind.
	run -0 find nocacert -type d -name 'rlock-??????' -print -quit # no answer if find fails
	[[ -z $output ]] || fail "left: $(find nocacert)"
}

@test "action: supersede (a newer job's request takes the place of a waiting one, which skips or fails) and preempt (a --preemptible holder stops and hands over) (issue 38)" {
	new_job holder
	new_job older
	new_job newer
	step holder main
	run -0 "${STEP[@]}"
	step_bg older main INPUT_SUPERSEDE=true INPUT_ON-CONFLICT=skip
	local older=$STEP_PID
	wait_until 30 waiting 1 || fail "$(cat older/main.*)"
	step_bg newer main INPUT_SUPERSEDE=true
	local newer=$STEP_PID
	rlock_wait "$older" 30
	assert_equal "$RLOCK_STATUS" 0
	grep -qE '^::notice::`deploy` went to a newer request \(supersede\): https://github.example/acme/app/actions/runs/older skipped it after [0-9.]+ s$' \
		older/main.out || fail "$(cat older/main.*)"
	assert_equal "$(job_var older output acquired)" false
	step holder post
	run -0 "${STEP[@]}"
	rlock_wait "$newer" 30
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(job_var newer output acquired)" true
	step newer post
	run -0 "${STEP[@]}"
	# Preempt: a holder that agreed to be stopped (rlock --preemptible) gives way.
	start_holder deploy --preemptible
	new_job preempt
	step preempt main INPUT_PREEMPT=true INPUT_WAIT=60s
	run -0 "${STEP[@]}"
	rlock_wait "$HOLDER_PID" 30
	assert_equal "$RLOCK_STATUS" 81
	assert_equal "$(rcli GET 'rlock:{deploy}')" "$(job_var preempt state token)"
	step preempt post
	run -0 "${STEP[@]}"
	# A switch that is neither true nor false: one line, nothing taken.
	new_job bad
	step bad main INPUT_PREEMPT=maybe
	run -1 "${STEP[@]}"
	assert_output "::error::rlock: preempt: 'maybe' is not true or false"
	key_absent 'rlock:{deploy}'
}

@test "action: once-per (a job whose last step ran marks the name done at its post step; later jobs skip; a failed job marks nothing) (issue 38)" {
	# A job that failed before its last step: released, nothing marked.
	new_job failed
	step failed main INPUT_ONCE-PER=1h
	run -0 "${STEP[@]}"
	assert_equal "$(job_var failed output acquired)" true
	[[ -n $(job_var failed env RLOCK_DONE_FILE) ]] || fail "env: $(cat failed/env)"
	step failed post
	run -0 "${STEP[@]}"
	assert_output --partial 'not marked done'
	key_absent 'rlock:{deploy}'
	key_absent 'rlock:{deploy}:done'
	# A job that reached its last step (touch "$RLOCK_DONE_FILE", as the README says).
	new_job ok
	step ok main INPUT_ONCE-PER=1h
	run -0 "${STEP[@]}"
	job_shell ok 'touch "$RLOCK_DONE_FILE"'
	step ok post
	run -0 "${STEP[@]}"
	assert_output --partial 'marked done for 1h (once-per)'
	key_absent 'rlock:{deploy}'
	assert_equal "$(rcli GET 'rlock:{deploy}:done')" "$(job_var ok output fence)"
	run -0 find ok -name 'rlock-done-*' # no answer if find fails
	[[ -z $output ]] || fail "the done file is left"
	# Inside the window: the next job takes nothing and succeeds, whatever on-conflict says.
	new_job later
	step later main INPUT_ONCE-PER=1h
	run -0 --separate-stderr "${STEP[@]}"
	assert_line --regexp '^::notice::`deploy` is done for this window \(once-per: a job succeeded, fence [0-9]+ for [0-9]+ s more\): https://github.example/acme/app/actions/runs/later skipped it$'
	assert_equal "$(job_var later output acquired)" false
	assert_equal "$(job_var later output "done")" true
	took_nothing later
	step later post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	# A busy lock is still busy, not done (once-per given, no mark).
	rcli DEL 'rlock:{deploy}:done' >/dev/null
	new_job holder
	step holder main
	run -0 "${STEP[@]}"
	new_job busy
	step busy main INPUT_ONCE-PER=1h INPUT_WAIT=0
	run -1 --separate-stderr "${STEP[@]}"
	assert_line --regexp '^::error::`deploy` is busy '
	step holder post
	run -0 "${STEP[@]}"
}

@test "action: once-per's skip names the exact fence of the run that succeeded, past 2^53 (JSON.parse made it a double)" {
	rcli SET 'rlock:{deploy}:done' 9007199254740993 PX 3600000 >/dev/null
	new_job later
	step later main INPUT_ONCE-PER=1h
	run -0 --separate-stderr "${STEP[@]}"
	assert_line --regexp '^::notice::`deploy` is done for this window \(once-per: a job succeeded, fence 9007199254740993 for [0-9]+ s more\): '
	grep -q 'fence 9007199254740993 ' later/summary || fail "summary: $(cat later/summary)"
	rcli DEL 'rlock:{deploy}:done' >/dev/null
}

@test "action: lock-delay and wait-replicas inputs reach rlock (--lock-delay, --wait-replicas) (issue 38)" {
	new_job delayed
	step delayed main INPUT_LOCK-DELAY=5m
	run -0 "${STEP[@]}"
	# the holder's lock-delay entry: its lease end + 5 min
	[[ -n $(rcli ZSCORE 'rlock:{deploy}:delay' "$(job_var delayed state token)") ]] ||
		fail "no lock-delay entry: $(rcli ZRANGE 'rlock:{deploy}:delay' 0 -1)"
	step delayed post
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}:delay' # released: the name opens at once
	# this server has no replica: WAIT 1 is not acknowledged, nothing is taken
	new_job replicas
	step replicas main INPUT_WAIT-REPLICAS=1 INPUT_WAIT=0
	run -1 --separate-stderr "${STEP[@]}"
	assert_regex "$stderr" 'replica'
	assert_equal "$(job_var replicas output acquired)" false
	key_absent 'rlock:{deploy}'
}
