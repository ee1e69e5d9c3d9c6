// SPDX-License-Identifier: MIT
// The runner's side of the action, without third-party packages: inputs arrive as
// INPUT_<NAME> variables; outputs, state, variables for later steps and the step
// summary are lines appended to the files named by GITHUB_OUTPUT, GITHUB_STATE,
// GITHUB_ENV and GITHUB_STEP_SUMMARY; the post step finds the state as STATE_<name>.
'use strict';

const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

function input(name) {
  return (process.env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] || '').trim();
}

function state(name) {
  return process.env[`STATE_${name}`] || '';
}

// NAME=VALUE, or NAME<<DELIMITER lines for a value with a line break.
function fileCommand(fileVar, name, value) {
  const file = process.env[fileVar];
  if (!file) throw new Error(`$${fileVar} is not set (not run by a GitHub Actions runner?)`);
  const v = String(value);
  let text = `${name}=${v}\n`;
  if (/[\r\n]/.test(v)) {
    const delim = `rlock_${crypto.randomBytes(16).toString('hex')}`;
    text = `${name}<<${delim}\n${v}\n${delim}\n`;
  }
  fs.appendFileSync(file, text);
}

const setOutput = (name, value) => fileCommand('GITHUB_OUTPUT', name, value);
const saveState = (name, value) => fileCommand('GITHUB_STATE', name, value);
const exportVariable = (name, value) => fileCommand('GITHUB_ENV', name, value);

function summary(line) {
  if (process.env.GITHUB_STEP_SUMMARY) fs.appendFileSync(process.env.GITHUB_STEP_SUMMARY, `${line}\n`);
}

// Text that someone else may have written (another holder's label, host or command,
// a server's message, an input) as one line of plain text: no line break (a line
// starting "::" would be a workflow command: ::add-mask::, ::stop-commands::...), no
// terminal escape, no character that turns text around (bidi controls), each shown
// as \xNN or \u{NNNN} instead.
function plain(text) {
  return String(text).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g, (c) => {
    const n = c.codePointAt(0);
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u{${n.toString(16)}}`;
  });
}

// plain(), then safe in the step summary (GitHub's Markdown, which also takes HTML):
// what would make a link, an image, a tag, emphasis, a table or a heading is
// backslash-escaped (&, <, > as entities); URLs and words read as they were.
function markdown(text) {
  return plain(text)
    .replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
    .replace(/[\\`*_{}[\]()#+!|~]/g, (c) => `\\${c}`)
    .replace(/^([0-9]*)([-=.])/, '$1\\$2');
}

// A code span holding text (a lock name: printable ASCII, maybe with backticks).
function code(text) {
  const t = plain(text);
  const runs = t.match(/`+/g) || [];
  const fence = '`'.repeat(1 + Math.max(0, ...runs.map((r) => r.length)));
  const pad = /^`|`$/.test(t) ? ' ' : '';
  return `${fence}${pad}${t}${pad}${fence}`;
}

// A workflow command on stdout, its data one plain line, escaped as the runner reads it.
function command(name, data) {
  const escaped = plain(data).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  process.stdout.write(`::${name}::${escaped}\n`);
}

// The environment of every rlock the action runs: the server and the password from
// the inputs (never on a command line), and no INPUT_* (the keeper outlives the step).
function rlockEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('INPUT_')) env[k] = v;
  if (input('url')) env.RLOCK_URL = input('url');
  if (input('password')) env.RLOCK_PASSWORD = input('password');
  return Object.assign(env, extra);
}

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const file = path.join(dir || '.', name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch (e) {
      // not there: the next directory
    }
  }
  return null;
}

// The rlock on the PATH, else one built from this checkout (cmake; needs a C compiler,
// pkg-config, libhiredis-dev and libssl-dev on the runner).
function findRlock() {
  const found = onPath('rlock');
  if (found) return found;
  const src = path.resolve(__dirname, '..');
  const build = path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'rlock-action-build');
  const steps = [
    ['-S', src, '-B', build, '-DCMAKE_BUILD_TYPE=Release', '-DBUILD_TESTING=OFF'],
    ['--build', build, '--target', 'rlock', '--parallel'],
  ];
  command('group', `no rlock on the PATH: building ${src}`);
  for (const args of steps) {
    const r = childProcess.spawnSync('cmake', args, { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) {
      command('endgroup', '');
      throw new Error(`cmake ${args.join(' ')}: ${r.error ? r.error.message : `exit ${r.status}`}`);
    }
  }
  command('endgroup', '');
  return path.join(build, 'rlock');
}

module.exports = {
  code, command, exportVariable, findRlock, input, markdown, plain, rlockEnv, saveState, setOutput,
  state, summary,
};
