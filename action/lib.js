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

// ::add-mask::VALUE: the runner hides VALUE from every later line of the job's log. The
// data escaped as the runner reads it back (not plain(): the mask must be the value).
function mask(value) {
  const v = String(value);
  if (!v) return;
  const esc = (t) => t.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  process.stdout.write(`::add-mask::${esc(v)}\n`);
}

// The password a URL carries (user:PASSWORD@), as written and decoded; [] if none.
function urlPasswords(url) {
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^@/?#]*)@/.exec(url);
  if (!m || !m[1].includes(':')) return [];
  const raw = m[1].slice(m[1].indexOf(':') + 1);
  let decoded = raw;
  try {
    decoded = decodeURIComponent(raw);
  } catch (e) {
    // not %-encoded as it should be: the raw text is what rlock reads
  }
  return [raw, decoded].filter((p) => p !== '');
}

// The connection inputs (url, password, cacert, cert, tls-key) as a config file of the
// job's own: DIR (0700, under RUNNER_TEMP) holds `config` (0600: url = the url input,
// password-file = DIR/password, the TLS files as absolute paths) and `password`
// (0600, one line). The main step, the post step and, through RLOCK_CONFIG in
// GITHUB_ENV, every later step read the server and the credentials from it: the
// password is in no environment, log or command line. null without such inputs.
const TLS_INPUTS = ['cacert', 'cert', 'tls-key'];
function writeConnection() {
  const url = input('url');
  const password = input('password');
  for (const name of ['url', 'password', ...TLS_INPUTS]) {
    if (/[\r\n\0]/.test(input(name))) throw new Error(`the input ${name} has a line break`);
  }
  // Masked before anything else is printed.
  for (const secret of [password, ...urlPasswords(url)]) mask(secret);
  if (!url && !password && !TLS_INPUTS.some((name) => input(name))) return null;
  const lines = [];
  const dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'rlock-'));
  fs.chmodSync(dir, 0o700);
  if (url) lines.push(`url = ${url}`);
  if (password) {
    const file = path.join(dir, 'password');
    fs.writeFileSync(file, `${password}\n`, { mode: 0o600, flag: 'wx' });
    lines.push(`password-file = ${file}`);
  }
  for (const name of TLS_INPUTS) {
    if (input(name)) lines.push(`${name} = ${path.resolve(input(name))}`);
  }
  // A value is read up to a " #" (a comment): a path or URL with one would be cut.
  const cut = lines.find((l) => / #/.test(l.slice(l.indexOf(' = ') + 3)));
  if (cut) throw new Error(`the input for ${cut.split(' ')[0]} holds " #", which a config file reads as a comment`);
  const file = path.join(dir, 'config');
  fs.writeFileSync(file, `# written by the rlock action for this job; removed by its post step\n${lines.join('\n')}\n`,
    { mode: 0o600, flag: 'wx' });
  return { dir, file, url: Boolean(url) };
}

// The environment of every rlock the action runs: the connection's config file (conn:
// { file, url }), no RLOCK_URL of the job's when the url input names the server (the
// file's url counts, as in later steps), and no INPUT_* (the keeper outlives the step).
function rlockEnv(conn, extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('INPUT_')) env[k] = v;
  if (conn && conn.file) {
    env.RLOCK_CONFIG = conn.file;
    if (conn.url) delete env.RLOCK_URL;
  }
  return Object.assign(env, extra);
}

// The files writeConnection() wrote; nothing if DIR is not one of its directories.
function removeConnection(dir) {
  if (!dir || !/^rlock-[A-Za-z0-9]{6}$/.test(path.basename(dir))) return;
  for (const name of ['password', 'config']) {
    try {
      fs.unlinkSync(path.join(dir, name));
    } catch (e) {
      // not written (no password input) or already gone
    }
  }
  try {
    fs.rmdirSync(dir);
  } catch (e) {
    // already gone
  }
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

// What building rlock needs that the runner lacks, as Debian/Ubuntu packages: a tool
// not on the PATH (a stock runner has cmake, a C compiler and pkg-config, some not
// from a package), a library whose headers dpkg does not know (a stock runner lacks
// libhiredis-dev and libssl-dev). Without dpkg-query, only the tools are checked.
function buildNeeds() {
  const missing = [];
  for (const [tool, pkg] of [['cmake', 'cmake'], ['cc', 'gcc'], ['pkg-config', 'pkg-config']]) {
    if (!onPath(tool)) missing.push(pkg);
  }
  if (!onPath('dpkg-query')) return missing;
  for (const pkg of ['libhiredis-dev', 'libssl-dev']) {
    const r = childProcess.spawnSync('dpkg-query', ['-W', '--showformat=${Status}', pkg], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'],
    });
    if (r.status !== 0 || !/ installed$/.test(r.stdout || '')) missing.push(pkg);
  }
  return missing;
}

// apt-get update and install of PKGS, non-interactive, through `sudo -n` unless root
// (a GitHub-hosted runner's sudo asks no password); a failure ends the step.
function installPackages(pkgs) {
  if (!onPath('apt-get')) {
    throw new Error(`building rlock needs ${pkgs.join(', ')}: install them, or put rlock on the PATH`);
  }
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!root && !onPath('sudo')) {
    throw new Error(`building rlock needs ${pkgs.join(', ')}, and without sudo the action cannot install them`);
  }
  const prefix = (root ? [] : ['sudo', '-n']).concat(['env', 'DEBIAN_FRONTEND=noninteractive', 'apt-get']);
  for (const args of [['-q', 'update'], ['-q', '-y', '--no-install-recommends', 'install', ...pkgs]]) {
    const argv = prefix.concat(args);
    console.log(`rlock: ${argv.join(' ')}`);
    const r = childProcess.spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) {
      throw new Error(`${argv.join(' ')}: ${r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`}`);
    }
  }
}

// The rlock on the PATH, else one built from this checkout with cmake, after installing
// what the build needs and the runner lacks (buildNeeds).
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
  try {
    const missing = buildNeeds();
    if (missing.length) installPackages(missing);
    for (const args of steps) {
      const r = childProcess.spawnSync('cmake', args, { stdio: ['ignore', 'inherit', 'inherit'] });
      if (r.status !== 0) throw new Error(`cmake ${args.join(' ')}: ${r.error ? r.error.message : `exit ${r.status}`}`);
    }
  } finally {
    command('endgroup', '');
  }
  return path.join(build, 'rlock');
}

module.exports = {
  code, command, exportVariable, findRlock, input, markdown, mask, plain, removeConnection, rlockEnv,
  saveState, setOutput, state, summary, writeConnection,
};
