// Builds the native BLAS addon (native/ -> native/build/Release/openclaw_native.node); run as
// the package's install script. A failed build must not fail the install, because the engine
// still works with its portable TypeScript kernels: on any failure this prints one line saying
// why and what to do, then the end of the build output so a person can act, and exits 0.
// On success it prints nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageRoot = dirname(dirname(fileURLToPath(import.meta.url)));
const nativeDir = join(packageRoot, 'native');
const addonPath = join(nativeDir, 'build', 'Release', 'openclaw_native.node');
const OUTPUT_TAIL_LINES = 25;

// A closed stderr (e.g. piped into `head`) must not turn into a failed install either.
process.stderr.on('error', () => {});

try {
  build();
} catch (err) {
  giveUp(`unexpected error: ${err instanceof Error ? err.message : String(err)}`, '');
}

function build() {
  const nodeGyp = findNodeGyp();
  if (!nodeGyp) return giveUp('node-gyp not found', '');
  const args = [...nodeGyp.args, 'rebuild', '--jobs=max', `--directory=${nativeDir}`];
  const nodedir = nodeInstallPrefix();
  if (nodedir) args.push(`--nodedir=${nodedir}`);

  const run = runCapturingOutput(nodeGyp.command, args);
  if (run.error) return giveUp(`could not run node-gyp: ${run.error.message}`, run.output);
  if (run.status !== 0) return giveUp(diagnose(run.output, run.status), run.output);

  // What links can still fail to load (a missing shared library, an unresolved symbol), so
  // load it once in a child process. A broken addon is removed: the engine would otherwise
  // try it, and some of these failures kill the process instead of throwing.
  const load = runCapturingOutput(process.execPath, ['-e', `require(${JSON.stringify(addonPath)})`]);
  if (load.status !== 0) {
    rmSync(addonPath, { force: true });
    const lines = relevantLines(load.output);
    const complaint = lines.find((line) => /Error:/.test(line)) ?? lines.at(-1) ?? `exit status ${load.status}`;
    return giveUp(`it built but does not load: ${complaint.trim().slice(0, 160)}`, load.output);
  }
}

/** The node-gyp to run: npm's choice, else the copy bundled with npm, else one on PATH. */
function findNodeGyp() {
  const fromNpm = process.env.npm_config_node_gyp;
  if (fromNpm && existsSync(fromNpm)) return asCommand(fromNpm);
  for (const npmCli of npmCliCandidates()) {
    const bundled = join(dirname(npmCli), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    if (existsSync(bundled)) return asCommand(bundled);
  }
  const onPath = findOnPath('node-gyp');
  return onPath ? asCommand(onPath) : undefined;
}

function asCommand(path) {
  return path.endsWith('.js') ? { command: process.execPath, args: [path] } : { command: path, args: [] };
}

/** Paths of npm's npm-cli.js: the one running this script, then the npm on PATH. */
function npmCliCandidates() {
  const candidates = [];
  if (process.env.npm_execpath) candidates.push(process.env.npm_execpath);
  const npmOnPath = findOnPath('npm');
  if (npmOnPath) candidates.push(realpathSync(npmOnPath));
  return candidates;
}

function findOnPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** The Node install prefix when it has the Node-API headers, so node-gyp needs no download. */
function nodeInstallPrefix() {
  const prefix = dirname(dirname(process.execPath));
  return existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined;
}

/** Runs a command with stdout and stderr interleaved into one string, as a terminal would show them. */
function runCapturingOutput(command, args) {
  const dir = mkdtempSync(join(tmpdir(), 'openclaw-rl-build-'));
  const logPath = join(dir, 'output.log');
  const log = openSync(logPath, 'w');
  try {
    const run = spawnSync(command, args, { cwd: nativeDir, stdio: ['ignore', log, log] });
    return { status: run.status, error: run.error, output: readFileSync(logPath, 'utf8') };
  } finally {
    closeSync(log);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A short reason for the failure: a known cause, else the compiler's first error. */
function diagnose(output, status) {
  const lines = relevantLines(output);
  const text = lines.join('\n');
  const known = [
    [/cblas\.h: No such file|'cblas\.h' file not found/, 'OpenBLAS headers not found'],
    [/cannot find -lopenblas|library not found for -lopenblas/, 'OpenBLAS library not found'],
    [/dnnl\.h: No such file|cannot find -ldnnl/, 'oneDNN (libdnnl-dev) only partly installed'],
    [/find any Python|Python is not set/i, 'Python 3 not found, node-gyp needs it'],
    [
      /node_api\.h: No such file|network connectivity|ENOTFOUND|EAI_AGAIN|ECONNREFUSED/,
      'Node.js headers not found and not downloadable',
    ],
    [/not found: make|make: not found|spawn make ENOENT/, 'make not found'],
    [
      /\b(cc|gcc|clang)'?:? (command )?not found|No such file or directory: '[^']*\b(cc|gcc|clang)'|xcrun: error/,
      'no C compiler',
    ],
  ];
  for (const [pattern, reason] of known) if (pattern.test(text)) return reason;
  const compilerError = lines.find((line) => /\berror:/.test(line));
  if (compilerError) return compilerError.trim().slice(0, 160);
  return `node-gyp exited with status ${status}`;
}

function giveUp(reason, output) {
  process.stderr.write(
    `openclaw-rl: native BLAS addon not built (${reason}); the engine will use the portable TypeScript ` +
      `kernels (much slower). For the fast path: apt-get install libopenblas-dev libdnnl-dev (macOS: Xcode ` +
      `command line tools), then npm rebuild openclaw-rl\n`,
  );
  const tail = relevantLines(output).slice(-OUTPUT_TAIL_LINES);
  if (tail.length > 0) process.stderr.write(tail.map((line) => `  ${line}\n`).join(''));
}

/** The build output without node-gyp's progress chatter, stack frames and boilerplate footer. */
function relevantLines(output) {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => !/^gyp (info|http|verb|sill)/.test(line))
    .filter((line) => !/^gyp ERR! (stack\s+at |System|command|cwd|node -v|node-gyp -v|not ok)/.test(line));
}
