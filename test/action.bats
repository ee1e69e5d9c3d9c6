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

# A later step of JOB (a `run:`): its environment has what GITHUB_ENV received.
# shellcheck disable=SC2046  # the KEY=VALUE lines of GITHUB_ENV, one word each
job_shell() {
	local job=$1
	shift
	env -C "$BATS_TEST_TMPDIR/$job" "PATH=$BATS_TEST_TMPDIR/bin:$PATH" \
		$(cat "$BATS_TEST_TMPDIR/$job/env") bash -c "$@"
}

@test "action: the main step takes the lock, masks the token before printing anything, sets outputs, RLOCK_* and the summary; post releases" {
	new_job job1
	step job1 main
	run -0 --separate-stderr "${STEP[@]}"
	local token
	token=$(rcli GET 'rlock:{deploy}')
	[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "not held: $token"
	# The runner hides the token from the first line on: nothing shows it before.
	assert_equal "${lines[0]}" "::add-mask::$token"
	[[ $(printf '%s\n%s\n' "$output" "$stderr" | grep -v '^::add-mask::' | grep -c "$token") == 0 ]] ||
		fail "the token is printed: $output $stderr"
	[[ $output$stderr != *"$REDISCLI_AUTH"* ]] || fail "the password is printed"
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
	job_shell job1 'RLOCK_URL=$0 RLOCK_PASSWORD=$1 rlock --held' "$REDIS_URL" "$REDISCLI_AUTH"
	step job1 post
	run -0 --separate-stderr "${STEP[@]}"
	assert_output --regexp "^rlock: released 'deploy' after [0-9.]+ s$"
	key_absent 'rlock:{deploy}' || fail "not released"
	wait_until 10 not proc_alive "$keeper"
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
	[[ ! -s job2/state ]]
	step job2 post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	assert_equal "$(rcli GET 'rlock:{deploy}')" "$token"
	step job1 post
	run -0 "${STEP[@]}"
}

@test "action: on-conflict skip: a busy lock skips (step succeeds, acquired=false); fail (default) fails the step" {
	new_job holder
	new_job skipper
	new_job failer
	step holder main
	run -0 "${STEP[@]}"
	step skipper main INPUT_WAIT=0 INPUT_ON-CONFLICT=skip
	run -0 --separate-stderr "${STEP[@]}"
	assert_output --regexp '^::notice::`deploy` is busy \(held by https://github.example/acme/app/actions/runs/holder\): https://github.example/acme/app/actions/runs/skipper skipped it after [0-9.]+ s$'
	assert_equal "$(job_var skipper output acquired)" false
	assert_equal "$(job_var skipper output fence)" ''
	grep -q 'skipped it' skipper/summary
	[[ ! -s skipper/state && ! -s skipper/env ]]
	step skipper post
	run -0 --separate-stderr "${STEP[@]}"
	[[ -z $output$stderr ]] || fail "post printed: $output $stderr"
	step failer main INPUT_WAIT=200ms
	run -1 --separate-stderr "${STEP[@]}"
	assert_output --regexp '^::error::`deploy` is busy .* gave up after [0-9.]+ s$'
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
	assert_output --regexp "^::error::rlock --acquire of 'deploy' failed \(exit 69\)"
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

@test "action: without an rlock on the PATH the main step builds this checkout with cmake" {
	new_job build
	mkdir stub
	ln -s "$(command -v node)" stub/node
	# A cmake that records its arguments and "builds" by copying the binary under test.
	cat >stub/cmake <<EOF
#!/bin/bash
echo "\$*" >>$BATS_TEST_TMPDIR/cmake.log
if [[ \$1 == --build ]]; then /bin/cp "$RLOCK" "\$2/rlock"; else /bin/mkdir -p "\$4"; fi
EOF
	chmod +x stub/cmake
	step build main "PATH=$PWD/stub"
	run -0 --separate-stderr "${STEP[@]}"
	local dir=$PWD/build/rlock-action-build
	assert_equal "$(sed -n 1p cmake.log)" "-S $RLOCK_SOURCE_DIR -B $dir -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF"
	assert_equal "$(sed -n 2p cmake.log)" "--build $dir --target rlock --parallel"
	assert_equal "$(job_var build state rlock)" "$dir/rlock"
	step build post "PATH=$PWD/stub"
	run -0 "${STEP[@]}"
	key_absent 'rlock:{deploy}'
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
