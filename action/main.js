// SPDX-License-Identifier: MIT
// The action's main step: take the lock with `rlock --acquire` (a detached keeper
// renews it until the post step gives it back), mask the token before anything can
// print it, leave the post step its state, set the outputs and RLOCK_* for later
// steps, and say in the step summary who waited for whom, and how long.
'use strict';

const childProcess = require('child_process');
const crypto = require('crypto');
const os = require('os');
const path = require('path');
const lib = require('./lib');

// What the runner sends to a step of a cancelled job.
const STOPS = ['SIGINT', 'SIGTERM'];

function modeArgs(mode) {
  if (mode === '' || mode === 'exclusive') return [];
  if (mode === 'shared') return ['--shared'];
  if (mode === 'fair') return ['--fair'];
  const limit = /^limit\s+([0-9]+)$/.exec(mode);
  if (limit) return ['--limit', limit[1]];
  throw new Error(`mode: '${mode}' is not exclusive, shared, limit N or fair`);
}

// The run's page: who holds the lock, as --status, --list and waiters show it.
function defaultLabel() {
  const { GITHUB_SERVER_URL: server, GITHUB_REPOSITORY: repo, GITHUB_RUN_ID: run } = process.env;
  return server && repo && run ? `${server}/${repo}/actions/runs/${run}` : '';
}

function acquireArgs(key, label, logFile) {
  // -E 75 whatever a config file says: a busy lock must not look like a success.
  // Values attached (--key=NAME): rlock refuses a value given as its own word that
  // spells one of its options (-k --wait), and a name or label may start with '-'.
  const args = [`--key=${key}`, '--acquire', '--format', 'github', '--conflict-exit-code', '75'];
  args.push(`--log-file=${logFile}`);
  if (label) args.push(`--label=${label}`);
  for (const [name, option] of [['wait', '--wait'], ['ttl', '--ttl'], ['max-hold', '--max-hold'],
    ['once-per', '--once-per'], ['lock-delay', '--lock-delay'], ['wait-replicas', '--wait-replicas']]) {
    if (lib.input(name)) args.push(`${option}=${lib.input(name)}`);
  }
  for (const name of ['supersede', 'preempt']) {
    if (bool(name)) args.push(`--${name}`);
  }
  // Exit 80 when superseded, whatever a config file says (as -E 75 above).
  if (bool('supersede')) args.push('--superseded-exit-code', '80');
  return args.concat(modeArgs(lib.input('mode')));
}

// A true/false input (YAML's spellings as the runner passes them; empty: false).
function bool(name) {
  const v = lib.input(name).toLowerCase();
  if (['', 'false', 'no', 'off', '0'].includes(v)) return false;
  if (['true', 'yes', 'on', '1'].includes(v)) return true;
  throw new Error(`${name}: '${lib.input(name)}' is not true or false`);
}

// --once-per's mark on the name, from --status --json: {fence, left_ms}, or null. The
// fence is a 64-bit integer, a JavaScript number only up to 2^53: taken as the text
// rlock printed (its exact digits), never through JSON.parse's double.
function doneMark(rlock, key, env) {
  const r = childProcess.spawnSync(rlock, [`--key=${key}`, '--status', '--json'], {
    env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 30000,
  });
  try {
    const done = JSON.parse(r.stdout).done || null;
    const exact = /"done":\{"fence":(-?[0-9]+)[,}]/.exec(r.stdout);
    if (done) done.fence = exact ? exact[1] : null;
    return done;
  } catch (e) {
    return null;
  }
}

// Who holds the lock now (their labels, else host and pid); '' when free or unknown.
function holders(rlock, key, env) {
  const r = childProcess.spawnSync(rlock, [`--key=${key}`, '--status', '--json'], {
    env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 30000,
  });
  try {
    const status = JSON.parse(r.stdout);
    if (!status.held) return '';
    const shown = status.holders || [status];
    const more = (status.holder_count || 0) - shown.length; // --status --json shows 32
    return shown
      .map((h) => h.label || (h.host ? `${h.host} pid ${h.pid}` : 'a holder without a name'))
      .join(', ') + (more > 0 ? ` and ${more} more` : '');
  } catch (e) {
    return '';
  }
}

// A cancellation: passed on to rlock --acquire while it runs (it gives up waiting, or
// its keeper gives the lock back); later, only noted (the post step releases). The
// handlers stay to the end: without them a signal would kill the step mid-write.
const cancel = { by: null, child: null };
for (const sig of STOPS) {
  process.on(sig, () => {
    cancel.by = cancel.by || sig;
    if (cancel.child) cancel.child.kill(sig);
  });
}

// rlock --acquire; resolves with its status and its KEY=VALUE lines.
function acquire(rlock, args, env) {
  return new Promise((resolve) => {
    const child = childProcess.spawn(rlock, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const result = { out: '' };
    const done = (extra) => {
      cancel.child = null;
      resolve(Object.assign(result, extra, { stoppedBy: cancel.by }));
    };
    cancel.child = child;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => { result.out += d; });
    child.on('error', (error) => done({ error }));
    child.on('close', (status, signal) => done({ status, signal }));
  });
}

function parseVars(out) {
  const vars = {};
  for (const line of out.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) vars[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return vars;
}

function held(ctx, vars) {
  const { key, label, waited, before, conn } = ctx;
  for (const name of ['RLOCK_KEY', 'RLOCK_TOKEN', 'RLOCK_FENCE']) lib.exportVariable(name, vars[name]);
  // Later steps reach the same server with the same credentials: the connection's
  // config file (a job's own RLOCK_URL would beat its url: emptied).
  if (conn) {
    lib.exportVariable('RLOCK_CONFIG', conn.file);
    if (conn.url && process.env.RLOCK_URL) lib.exportVariable('RLOCK_URL', '');
  }
  lib.setOutput('fence', vars.RLOCK_FENCE);
  // Labels are anyone's text (other holders' above all): plain on stdout, Markdown-safe
  // in the summary.
  const line = (who, by, k, fence) => (before
    ? `${who} waited ${waited} s for ${by}, then took ${k} (fence ${fence})`
    : `${who} took ${k} after ${waited} s (fence ${fence})`);
  const who = label || 'this job';
  console.log(`rlock: ${lib.plain(line(who, before, `\`${key}\``, vars.RLOCK_FENCE))}`);
  lib.summary(line(lib.markdown(who), lib.markdown(before), lib.code(key),
    lib.markdown(vars.RLOCK_FENCE)));
}

// The lock came while the step was being cancelled: give it back now.
function giveBack(ctx, token, sig) {
  childProcess.spawnSync(ctx.rlock, [`--key=${ctx.key}`, '--release'], {
    env: Object.assign(ctx.env, { RLOCK_TOKEN: token }), stdio: ['ignore', 'inherit', 'inherit'],
  });
  lib.command('error', `cancelled (${sig}) as the lock '${ctx.key}' came: given back`);
  return 1;
}

function notHeld(ctx, r, done) {
  const { key, label, waited, before } = ctx;
  lib.setOutput('fence', '');
  if (r.error) throw new Error(`cannot run ${ctx.rlock}: ${r.error.message}`);
  if (r.stoppedBy) {
    lib.command('error', `cancelled (${r.stoppedBy}) while taking the lock '${key}'`);
    return 1;
  }
  if (done) {
    const left = done.left_ms >= 0 ? ` for ${(done.left_ms / 1000).toFixed(0)} s more` : '';
    const line = (k, who) => `${k} is done for this window (once-per: a job succeeded, fence `
      + `${done.fence}${left}): ${who} skipped it`;
    lib.setOutput('done', 'true');
    lib.summary(line(lib.code(key), lib.markdown(label || 'this job')));
    lib.command('notice', line(`\`${key}\``, label || 'this job'));
    return 0;
  }
  if (r.status === 75 || r.status === 80) {
    // 80: --supersede, and a newer request took this one's place.
    const skip = lib.input('on-conflict') === 'skip';
    const what = (by) => (r.status === 80 ? 'went to a newer request (supersede)'
      : `is busy${before ? ` (held by ${by})` : ''}`);
    const line = (k, by, who) => `${k} ${what(by)}: ${who} `
      + `${skip ? 'skipped it' : 'gave up'} after ${waited} s`;
    lib.summary(line(lib.code(key), lib.markdown(before), lib.markdown(label || 'this job')));
    lib.command(skip ? 'notice' : 'error', line(`\`${key}\``, before, label || 'this job'));
    return skip ? 0 : 1;
  }
  const how = r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
  lib.command('error', `rlock --acquire of '${key}' failed (${how}): see its message above`);
  return 1;
}

async function main() {
  const key = lib.input('key');
  if (!key) throw new Error('the input key is required');
  if (!['', 'fail', 'skip'].includes(lib.input('on-conflict'))) {
    throw new Error(`on-conflict: '${lib.input('on-conflict')}' is not fail or skip`);
  }
  const label = lib.input('label') || defaultLabel();
  const log = path.join(process.env.RUNNER_TEMP || os.tmpdir(),
    `rlock-keeper-${crypto.randomBytes(8).toString('hex')}.log`);
  const args = acquireArgs(key, label, log);
  // First (it masks the password before anything prints); its files go at the post
  // step, or now if the lock is not taken.
  const conn = lib.writeConnection();
  if (conn) lib.saveState('conn', conn.dir);
  const rlock = lib.findRlock();
  const env = lib.rlockEnv(conn);
  const before = holders(rlock, key, env);
  const start = process.hrtime.bigint();
  const r = await acquire(rlock, args, env);
  const waited = (Number(process.hrtime.bigint() - start) / 1e9).toFixed(1);
  const vars = parseVars(r.out);
  const token = vars.RLOCK_TOKEN || '';
  const ctx = { rlock, key, label, env, waited, before, conn };
  if (token) lib.command('add-mask', token); // before any other line
  lib.setOutput('acquired', token ? 'true' : 'false');
  lib.setOutput('waited-seconds', waited);
  if (token && r.stoppedBy) return giveBack(ctx, token, r.stoppedBy);
  if (!token) {
    // once-per: a job succeeded inside the window (75 is -E's, busy's too: the mark
    // tells), read while the connection's files are still there.
    const done = r.status === 75 && lib.input('once-per') ? doneMark(rlock, key, env) : null;
    if (conn) lib.removeConnection(conn.dir);
    return notHeld(ctx, r, done);
  }
  // once-per: the name is marked done at the post step if the job's last step, run only
  // when every step before it succeeded, created this file (README: the Action).
  const doneFile = lib.input('once-per')
    ? path.join(process.env.RUNNER_TEMP || os.tmpdir(), `rlock-done-${crypto.randomBytes(8).toString('hex')}`)
    : '';
  if (doneFile) lib.exportVariable('RLOCK_DONE_FILE', doneFile);
  for (const [name, value] of [['rlock', rlock], ['key', key], ['token', token], ['log', log],
    ['once-per', lib.input('once-per')], ['done-file', doneFile],
    ['label', label], ['since', Date.now()], ['conn-file', conn ? conn.file : ''],
    ['conn-url', conn && conn.url ? 'true' : '']]) lib.saveState(name, value);
  held(ctx, vars);
  if (!cancel.by) return 0;
  lib.command('error', `cancelled (${cancel.by}): the post step gives the lock back`);
  return 1;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  lib.command('error', `rlock: ${e.message}`);
  process.exitCode = 1;
});
