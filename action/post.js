// SPDX-License-Identifier: MIT
// The action's post step (post-if: always()): give the lock back with `rlock
// --release`, after a failed or cancelled job too, and remove the connection's files.
// A lock no longer held (its lease lost during the job, or given up at --max-hold)
// fails the step with the keeper's reason, so the run is red; a main step that took
// nothing leaves nothing to do.
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const lib = require('./lib');

// The keeper's last word in its --log-file on why it let the lock go; '' if none.
function keeperReason(logFile) {
  let text = '';
  try {
    text = fs.readFileSync(logFile, 'utf8');
  } catch (e) {
    return '';
  }
  const lines = text.split('\n').filter((l) => /lock lost|max-hold is over/.test(l));
  return lines.length ? lines[lines.length - 1].replace(/^(\S+ )?rlock(-keeper)?(\[\d+\])?: /, '') : '';
}

function main() {
  const token = lib.state('token');
  if (!token) return 0; // the main step took nothing: a quiet no-op
  const key = lib.state('key');
  // The server and credentials of the main step (its connection's config file); the
  // token in the environment, not on a command line that ps shows.
  const conn = { file: lib.state('conn-file'), url: lib.state('conn-url') === 'true' };
  // once-per: the job's last step said every step succeeded (RLOCK_DONE_FILE): the
  // release marks the name done for the window.
  const once = lib.state('once-per');
  const doneFile = lib.state('done-file');
  const done = once && doneFile && fs.existsSync(doneFile);
  if (doneFile) fs.rmSync(doneFile, { force: true });
  const args = [`--key=${key}`, '--release'].concat(done ? [`--once-per=${once}`] : []);
  const r = childProcess.spawnSync(lib.state('rlock'), args, {
    env: lib.rlockEnv(conn, { RLOCK_TOKEN: token }),
    encoding: 'utf8',
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  const said = (r.stderr || '').trim();
  // rlock escapes what it prints; each line is made plain again all the same.
  if (said) process.stderr.write(`${said.split('\n').map(lib.plain).join('\n')}\n`);
  const secs = ((Date.now() - Number(lib.state('since'))) / 1000).toFixed(1);
  if (r.status === 0) {
    console.log(`rlock: released '${key}' after ${secs} s${done ? `, marked done for ${once} (once-per)`
      : once ? ' (not marked done: the job did not reach its last step, RLOCK_DONE_FILE)' : ''}`);
    return 0;
  }
  let msg;
  if (r.status === 79) {
    msg = `the lock '${key}' was no longer held at the end of the job (taken ${secs} s ago): `
      + `${keeperReason(lib.state('log')) || said}`;
  } else {
    const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
    msg = `rlock --release of '${key}' failed (${how})${said ? `: ${said}` : ''}`;
  }
  lib.command('error', msg);
  lib.summary(`${lib.markdown(lib.state('label') || 'this job')}: ${lib.markdown(msg)}`);
  return 1;
}

try {
  process.exitCode = main();
} catch (e) {
  lib.command('error', `rlock: ${e.message}`);
  process.exitCode = 1;
} finally {
  // The connection's config and password files, whatever happened.
  lib.removeConnection(lib.state('conn'));
}
