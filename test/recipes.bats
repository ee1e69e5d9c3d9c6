#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2016,SC2154,SC2153  # quoted $: for the shells the tests start; bats sets $stderr
# The recipes of docs/recipes.md, run as written: each test extracts its blocks from that
# page (a fenced block after `<!-- recipe:NAME -->`) and runs them the way the CI system,
# systemd or Kubernetes would, against this file's redis-server.

load helpers

setup_file() { common_setup_file --unix; }

setup() {
	common_setup
	mkdir -p bin
	ln -sf "$RLOCK" bin/rlock
	PATH=$PWD/bin:$PATH
	export RLOCK_URL=$REDIS_URL
	unset REDIS_URL
}

teardown() {
	local k p
	for k in $(rcli KEYS '*:owner'); do
		p=$(rcli HGET "$k" pid)
		[[ $p =~ ^[0-9]+$ && $(cat "/proc/$p/comm" 2>/dev/null) == rlock-keeper ]] &&
			kill -KILL "$p" 2>/dev/null
	done
	common_teardown
}

RECIPES=$RLOCK_SOURCE_DIR/docs/recipes.md

# recipe NAME: the fenced block of docs/recipes.md after <!-- recipe:NAME -->.
recipe() {
	awk -v m="<!-- recipe:$1 -->" '
		$0 == m { found = 1; next }
		found == 1 && /^```/ { found = 2; next }
		found == 2 && /^```/ { exit }
		found == 2 { print }' "$RECIPES"
}

# A CI step stub: checks that the lock is held by this job's token, records the fence.
make_stub() {
	cat >"$1" <<'EOF_STUB'
#!/bin/sh
set -eu
held=$(redis-cli -s "$REDIS_SOCKET" GET "$RLOCK_KEY")
[ "$held" = "$RLOCK_TOKEN" ] || { echo "$0: the lock is not held by this job ($held)" >&2; exit 1; }
# Another job cannot take it meanwhile.
st=0
env -u RLOCK_KEY -u RLOCK_TOKEN rlock -k "${LOCK:-deploy-prod}" -n -- true 2>/dev/null || st=$?
[ "$st" = 75 ] || { echo "$0: another job got the lock ($st)" >&2; exit 1; }
echo "$(basename "$0") fence=$RLOCK_FENCE" >>ran.log
EOF_STUB
	chmod +x "$1"
}

@test "recipe: GitHub Actions, several steps under one lock (fake \$GITHUB_ENV)" {
	recipe github >workflow.yml
	[[ -s workflow.yml ]] || fail "no github recipe in docs/recipes.md"
	make_stub migrate.sh
	make_stub deploy.sh
	: >github_env
	# The runner: steps in order, each in its own `bash -e` with the job's env and what
	# earlier steps appended to $GITHUB_ENV; `if: always()` steps run after a failure.
	run --separate-stderr python3 - workflow.yml <<'EOF_PY'
import os, subprocess, sys, yaml
wf = yaml.safe_load(open(sys.argv[1]))
(job,) = wf["jobs"].values()
env = dict(os.environ)
for k, v in job.get("env", {}).items():
    env[k] = os.environ["RLOCK_URL"] if "secrets.RLOCK_URL" in v else v
env["GITHUB_ENV"] = os.path.abspath("github_env")
failed = False
for step in job["steps"]:
    if failed and step.get("if") != "always()":
        print(f"step '{step['name']}': skipped")
        continue
    for line in open("github_env"):
        k, _, v = line.rstrip("\n").partition("=")
        env[k] = v
    st = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env).returncode
    print(f"step '{step['name']}': exit {st}")
    failed = failed or st != 0
sys.exit(1 if failed else 0)
EOF_PY
	printf '# %s\n' "${lines[@]}" >&3
	assert_success
	grep -qE '^RLOCK_TOKEN=[0-9a-f]{32}$' github_env
	[[ $(cat ran.log) == $'migrate.sh fence=1\ndeploy.sh fence=1' ]] || fail "ran: $(cat ran.log)"
	key_absent 'rlock:{deploy-prod}' || fail "not released"
}

@test "recipe: GitLab CI, a dotenv report; the release fails the job on a loss; after_script gives back after a failure" {
	recipe gitlab >gitlab-ci.yml
	[[ -s gitlab-ci.yml ]] || fail "no gitlab recipe in docs/recipes.md"
	make_stub migrate.sh
	make_stub deploy.sh
	# The runner: script in one shell, stopping at the first failure; after_script in a
	# new shell, always, its status ignored; then the dotenv report, read as GitLab does.
	cat >gitlab-runner.py <<'EOF_PY'
import os, re, subprocess, sys, yaml
(job,) = yaml.safe_load(open(sys.argv[1])).values()
env = dict(os.environ)
for k, v in job.get("variables", {}).items():
    env[k] = os.path.expandvars(v)
st = subprocess.run(["bash", "-e", "-c", "\n".join(job["script"])], env=env).returncode
print(f"script: exit {st}")
after = subprocess.run(["bash", "-e", "-c", "\n".join(job["after_script"])], env=env).returncode
print(f"after_script: exit {after}")
report = job["artifacts"]["reports"]["dotenv"]
for line in open(report):
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=[^\n]*\n", line):
        sys.exit(f"{report}: not a dotenv line: {line!r}")
    print(f"dotenv: {line.split('=')[0]}")
sys.exit(st)
EOF_PY
	DEPLOY_LOCK_URL=$RLOCK_URL run --separate-stderr env -u RLOCK_URL python3 gitlab-runner.py gitlab-ci.yml
	printf '# %s\n' "${lines[@]}" "$stderr" >&3
	assert_success
	assert_line 'after_script: exit 0'
	assert_line 'dotenv: RLOCK_FENCE'
	[[ $(cat ran.log) == $'migrate.sh fence=1\ndeploy.sh fence=1' ]] || fail "ran: $(cat ran.log)"
	key_absent 'rlock:{deploy-prod}' || fail "not released"
	[[ $stderr != *rlock:* ]] || fail "rlock said: $stderr"
	# A deploy that fails: the job fails, after_script releases.
	printf '#!/bin/sh\nexit 1\n' >deploy.sh
	DEPLOY_LOCK_URL=$RLOCK_URL run --separate-stderr env -u RLOCK_URL python3 gitlab-runner.py gitlab-ci.yml
	assert_failure
	assert_line 'after_script: exit 0'
	key_absent 'rlock:{deploy-prod}' || fail "not released after a failure"
	# A lock lost meanwhile: the script's release says so (79) and the job fails.
	printf '#!/bin/sh\nredis-cli -s "$REDIS_SOCKET" SET "$RLOCK_KEY" thief PX 600000 >/dev/null\n' >deploy.sh
	DEPLOY_LOCK_URL=$RLOCK_URL run --separate-stderr env -u RLOCK_URL python3 gitlab-runner.py gitlab-ci.yml
	assert_failure
	assert_line 'script: exit 79'
}

@test "recipe: GitHub Actions, the rlock action in a whole workflow (main and post steps under node)" {
	require_tool node
	recipe github-action >workflow.yml
	[[ -s workflow.yml ]] || fail "no github-action recipe in docs/recipes.md"
	make_stub migrate.sh
	make_stub deploy.sh
	echo 'echo "deploy.sh $*" >>args.log' >>deploy.sh
	# A sudo that records its arguments: with rlock on the PATH the action installs nothing.
	printf '#!/bin/sh\necho "sudo $*" >>%s/sudo.log\n' "$PWD" >bin/sudo
	chmod +x bin/sudo
	# The runner: checkout is a no-op (the test's directory), run steps in bash with
	# what GITHUB_ENV got, the action's main step under node with its inputs (action.yml's
	# defaults, then `with:`), its post step at the end of the job, always.
	run --separate-stderr python3 - workflow.yml <<'EOF_PY'
import os, re, subprocess, sys, yaml
src = os.environ["RLOCK_SOURCE_DIR"]
(job,) = yaml.safe_load(open(sys.argv[1]))["jobs"].values()
action = yaml.safe_load(open(f"{src}/action.yml"))
files = {n: os.path.abspath(n.lower()) for n in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")}
for f in files.values():
    open(f, "w").close()
base = dict(os.environ, **files, RUNNER_TEMP=os.getcwd(), GITHUB_ACTIONS="true", GITHUB_SERVER_URL="https://github.example",
            GITHUB_REPOSITORY="acme/app", GITHUB_RUN_ID="7")
secrets = {"RLOCK_URL": os.environ["RLOCK_URL"], "RLOCK_PASSWORD": ""}
outputs = {}

def expand(v):
    def one(m):
        e = m.group(1).strip().split(".")
        return secrets[e[1]] if e[0] == "secrets" else outputs[e[1]][e[3]]
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(v))

def read_kv(path):
    kv, lines = {}, open(path).read().split("\n")
    while lines:
        line = lines.pop(0)
        if "<<" in line and "=" not in line:
            name, delim = line.split("<<", 1)
            value = []
            while lines[0] != delim:
                value.append(lines.pop(0))
            lines.pop(0)
            kv[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            kv[name] = value
    return kv

def env():
    return dict(base, **read_kv(files["GITHUB_ENV"]))

posts, failed = [], False
for step in job["steps"]:
    name, uses = step.get("name", step.get("uses")), step.get("uses", "")
    if uses.startswith("actions/checkout@"):
        continue
    if uses.startswith("rlock/rlock@"):
        inputs = {f"INPUT_{k.upper()}": str(v.get("default", "")) for k, v in action["inputs"].items()}
        inputs.update({f"INPUT_{k.upper()}": expand(v) for k, v in step["with"].items()})
        open(files["GITHUB_OUTPUT"], "w").close()
        st = subprocess.run(["node", f"{src}/{action['runs']['main']}"], env=dict(env(), **inputs)).returncode
        outputs[step["id"]] = read_kv(files["GITHUB_OUTPUT"])
        posts.append((name, inputs))
    else:
        st = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", expand(step["run"])],
                            env=env()).returncode
    print(f"step '{name}': exit {st}")
    failed = failed or st != 0
for name, inputs in reversed(posts):
    state = {f"STATE_{k}": v for k, v in read_kv(files["GITHUB_STATE"]).items()}
    st = subprocess.run(["node", f"{src}/{action['runs']['post']}"], env=dict(env(), **inputs, **state)).returncode
    print(f"post '{name}': exit {st}")
    failed = failed or st != 0
sys.exit(1 if failed else 0)
EOF_PY
	printf '# %s\n' "${lines[@]}" >&3
	assert_success
	assert_line "post 'Take the deploy lock (wait up to 30 minutes; at most 1 hour)': exit 0"
	[[ $(cat ran.log) == $'migrate.sh fence=1\ndeploy.sh fence=1' ]] || fail "ran: $(cat ran.log)"
	assert_equal "$(cat args.log)" 'deploy.sh --fence 1'
	grep -q '^https://github.example/acme/app/actions/runs/7 took `deploy-prod`' github_step_summary
	[[ ! -e sudo.log ]] || fail "rlock is on the PATH, yet: $(cat sudo.log)"
	key_absent 'rlock:{deploy-prod}' || fail "not released"
}

@test "recipe: systemd service + timer (systemd-analyze verify; ExecStart on two hosts)" {
	recipe systemd-service >backup.service.orig
	recipe systemd-timer >backup.timer
	[[ -s backup.service.orig && -s backup.timer ]] || fail "no systemd recipe in docs/recipes.md"
	printf '#!/bin/sh\necho "$RLOCK_FENCE" >>%s/backups\n' "$PWD" >backup.sh
	chmod +x backup.sh
	# The same unit with this build's binary and a stub job where the recipe has
	# rlock (looked up by systemd) and /usr/local/bin/backup.sh.
	sed "s|^ExecStart=rlock |ExecStart=$RLOCK |; s|/usr/local/bin/backup.sh|$PWD/backup.sh|" \
		backup.service.orig >backup.service
	if command -v systemd-analyze >/dev/null; then
		run -0 systemd-analyze verify --man=no "$PWD/backup.service" "$PWD/backup.timer"
	else
		ci_skip "systemd-analyze is not installed" || true
	fi
	local cmd
	cmd=$(sed -n 's/^ExecStart=//p' backup.service)
	[[ -n $cmd ]]
	# Host A runs the backup; host B, fired a little later, skips it (--min-hold keeps
	# the lock): exit 0 both, one backup.
	run -0 bash -c "$cmd"
	run -0 bash -c "$cmd"
	[[ $(wc -l <backups) == 1 ]] || fail "backups: $(cat backups)"
}

@test "recipe: the systemd units find rlock where cmake --install puts it (/usr/local) and where the packages do (/usr): systemd-analyze verify" {
	command -v systemd-analyze >/dev/null || ci_skip "systemd-analyze is not installed"
	[[ -f $RLOCK_BUILD_DIR/CMakeCache.txt ]] || ci_skip "no CMake build directory"
	local prefix root unit out
	for prefix in /usr/local /usr; do
		root=$BATS_TEST_TMPDIR/root${prefix//\//-}
		run -0 env DESTDIR="$root" cmake --install "$RLOCK_BUILD_DIR" --prefix "$prefix"
		[[ -x $root$prefix/bin/rlock ]] || fail "no $prefix/bin/rlock"
		# what else the units run, as files that exist in that root
		mkdir -p "$root/bin" "$root/usr/local/bin" "$root/etc/systemd/system"
		cp /bin/sh "$root/bin/sh"
		printf '#!/bin/sh\n' >"$root/usr/local/bin/backup.sh"
		printf '#!/bin/sh\n' >"$root/usr/local/bin/reindex"
		chmod +x "$root/usr/local/bin/backup.sh" "$root/usr/local/bin/reindex"
		recipe systemd-service >"$root/etc/systemd/system/backup.service"
		awk '/^<!-- recipe:systemd-lock-unit/ { f = 1; next } f && /^```/ { if (f == 2) exit; f = 2; next } f == 2 { print }' \
			"$RECIPES" >"$root/etc/systemd/system/reindex.service"
		for unit in backup reindex; do
			[[ -s $root/etc/systemd/system/$unit.service ]] || fail "no $unit unit in docs/recipes.md"
			# (the root has no sysinit.target: that complaint is not the unit's)
			out=$(systemd-analyze verify --man=no --root="$root" "/etc/systemd/system/$unit.service" 2>&1 || true)
			[[ $out != *"not executable"* && $out != *"No such file"* ]] ||
				fail "$unit.service, rlock installed in $prefix: $out"
		done
		grep -q 'rlock' "$root/etc/systemd/system/backup.service"
	done
}

@test "recipe: Kubernetes CronJob, the container's command in two clusters at once: one run" {
	recipe kubernetes >cronjob.yml
	[[ -s cronjob.yml ]] || fail "no kubernetes recipe in docs/recipes.md"
	printf '#!/bin/sh\ntouch %s/started.$$\nwhile [ ! -e %s/go ]; do sleep 0.05; done\necho ran >>%s/runs\n' \
		"$PWD" "$PWD" "$PWD" >report.sh
	chmod +x report.sh
	local -a cmd
	mapfile -t cmd < <(python3 -c '
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
print("\n".join(c["command"]))' cronjob.yml)
	[[ ${cmd[0]} == rlock ]]
	cmd=("${cmd[@]/#\/app\/report.sh/$PWD/report.sh}")
	rlock_bg "${cmd[@]:1}"
	local a=$RLOCK_PID
	wait_until 30 compgen -G "started.*"
	rlock_bg "${cmd[@]:1}"
	rlock_wait "$RLOCK_PID" 30
	[[ $RLOCK_STATUS == 0 ]] || fail "the second cluster's run exited $RLOCK_STATUS"
	touch go
	rlock_wait "$a" 30
	[[ $RLOCK_STATUS == 0 ]]
	[[ $(wc -l <runs) == 1 ]] || fail "runs: $(cat runs)"
}

@test "recipe: fenced write — a holder whose lock was taken over cannot overwrite the newer write" {
	recipe fenced-write >fenced-write.sh
	[[ -s fenced-write.sh ]] || fail "no fenced-write recipe in docs/recipes.md"
	chmod +x fenced-write.sh
	export DB=$PWD/state.db
	# A normal run writes.
	run -0 rlock -k state -- ./fenced-write.sh "first"
	# A (fence 2) stalls inside its critical section; an operator breaks its lock and
	# B (fence 3) writes; then A wakes up and tries to write: refused by the fence.
	rlock_bg -k state -t 1s --on-lost ignore -c 'touch a.in; while [ ! -e a.go ]; do sleep 0.05; done; ./fenced-write.sh "stale A"'
	local a=$RLOCK_PID
	wait_until 30 test -e a.in
	run -0 rlock -k state --break
	run -0 rlock -k state -- ./fenced-write.sh "B's"
	touch a.go
	rlock_wait "$a" 30
	[[ $RLOCK_STATUS == 1 ]] || fail "A exited $RLOCK_STATUS: $(cat "$RLOCK_ERR")"
	grep -q 'refused, a newer holder' "$RLOCK_ERR"
	run -0 sqlite3 "$DB" 'SELECT fence, value FROM state'
	assert_output "3|B's"
	# A quote in the value is stored as is.
	run -0 rlock -k state -- ./fenced-write.sh "it's"
	run -0 sqlite3 "$DB" 'SELECT fence, value FROM state'
	assert_output "4|it's"
}

# supersede_place_is LABEL: the waiting --supersede request on deploy-prod is LABEL's.
supersede_place_is() { [[ $(rcli HGET 'rlock:{deploy-prod}:supersede' label) == "$1" ]]; }

@test "recipe: the same deploy queued from GitHub Actions, then from GitLab CI: the newer deploys, the older passes as skipped" {
	recipe supersede-github >github.yml
	recipe supersede-gitlab >gitlab.yml
	[[ -s github.yml && -s gitlab.yml ]] || fail "no supersede recipes in docs/recipes.md"
	: >log
	printf '#!/bin/sh\necho "deploy $RLOCK_FENCE" >>log\n' >deploy.sh
	chmod +x deploy.sh
	# each job's one command line, as its runner would run it
	python3 -c 'import sys, yaml; (j,) = yaml.safe_load(open(sys.argv[1]))["jobs"].values(); print(j["steps"][0]["run"])' github.yml >github.sh
	python3 -c 'import sys, yaml; (j,) = yaml.safe_load(open(sys.argv[1])).values(); print("\n".join(j["script"]))' gitlab.yml >gitlab.sh
	rlock_bg -k deploy-prod -- "$HOLD" h
	local h_pid=$RLOCK_PID
	wait_until 30 test -e h.started
	(GITHUB_RUN_ID=7 clean_exec bash -e github.sh) </dev/null >gh.out 2>gh.err &
	local gh=$!
	track_pid "$gh"
	wait_until 30 supersede_place_is "github 7"
	(CI_PIPELINE_ID=9 DEPLOY_LOCK_URL=$RLOCK_URL clean_exec bash -e gitlab.sh) </dev/null >gl.out 2>gl.err &
	local gl=$!
	track_pid "$gl"
	wait_until 30 proc_gone "$gh"
	wait "$gh" || fail "the GitHub job failed: $(cat gh.err)"
	grep -q 'superseded by a newer --supersede request (.* \[gitlab 9\])' gh.err
	touch h.release
	rlock_wait "$h_pid" 30
	wait_until 30 proc_gone "$gl"
	wait "$gl" || fail "the GitLab job failed: $(cat gl.err)"
	assert_equal "$(cat log)" "deploy 2"
}
