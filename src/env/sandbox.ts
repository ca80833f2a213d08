// A sandbox per terminal episode, built on bubblewrap (Debian package `bubblewrap`): every command
// runs in fresh user, mount, PID, network, IPC and UTS namespaces, sees /usr read-only and the
// episode's own directory (as /home/agent, plus its tmp/ as /tmp) as the only writable paths, has
// no network at all (an empty network namespace), and is bounded in wall time (the whole process
// tree is killed: bwrap's PID namespace dies with it), output (cut and the cut said), processes
// (RLIMIT_NPROC, counted per sandbox because it is set inside the new user namespace), memory
// (RLIMIT_AS per process) and file size (RLIMIT_FSIZE). Run as root, the sandbox first drops to
// nobody (setpriv), because the kernel never applies RLIMIT_NPROC to root.

import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { chown, lstat, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface SandboxLimits {
  /** Wall time of one command. */
  commandSeconds: number;
  /** Address space of each process. */
  memoryMb: number;
  /** Processes (and threads) alive at once in one sandbox. */
  processes: number;
  /** Output (stdout and stderr together) kept from one command; the rest is cut and the command killed. */
  outputBytes: number;
  /** Largest file a command may write. */
  fileMb: number;
  /** Everything in the episode's directory; over it, the episode ends. */
  directoryMb: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  commandSeconds: 10,
  memoryMb: 1024,
  processes: 64,
  outputBytes: 16_384,
  fileMb: 16,
  directoryMb: 64,
};

export interface CommandResult {
  /** Null when killed (time-out, output limit) or ended by a signal. */
  exitCode: number | null;
  output: string;
  truncated: boolean;
  timedOut: boolean;
  milliseconds: number;
}

export class SandboxUnavailableError extends Error {
  constructor(reason: string) {
    super(
      `the terminal environment needs a working sandbox and found none: ${reason}. Install bubblewrap ` +
        '(Debian/Ubuntu: apt-get install bubblewrap, or bash scripts/install-system-deps.sh) on a kernel ' +
        'that allows unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 where it exists)',
    );
    this.name = 'SandboxUnavailableError';
  }
}

/** How commands are wrapped on this machine; found once by probeSandbox. */
export interface SandboxSetup {
  bwrap: string;
  /** setpriv when running as root (to become nobody), else null. */
  setpriv: string | null;
  /** The uid and gid the sandboxed processes run as on the host (owner of the episode's files). */
  owner: { uid: number; gid: number } | null;
}

const NOBODY = { uid: 65534, gid: 65534 };
const HOME = '/home/agent';

/**
 * One folder per process and base holds every episode's folder, created at once so that an
 * interrupted run removes it whole on exit, episodes being created at that instant included.
 * Mode 0711: the sandbox's user (nobody, under root) may pass through it, not list it.
 */
const parents = new Map<string, string>();
process.once('exit', () => {
  for (const parent of parents.values()) {
    try {
      rmSync(parent, { recursive: true, force: true });
    } catch {
      spawnSync('chmod', ['-R', 'u+rwX', parent]);
      rmSync(parent, { recursive: true, force: true });
    }
  }
});

function parentFolder(base: string): string {
  let parent = parents.get(base);
  if (parent === undefined) {
    parent = mkdtempSync(join(base, `ocrl-sandboxes-${process.pid}-`));
    chmodSync(parent, 0o711);
    parents.set(base, parent);
  }
  return parent;
}

function which(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
    const path = join(dir || '.', name);
    if (existsSync(path)) return path;
  }
  return null;
}

/** Finds bubblewrap and proves it works here (runs `true` in a sandbox); throws SandboxUnavailableError. */
export async function probeSandbox(base = tmpdir()): Promise<SandboxSetup> {
  const bwrap = which('bwrap');
  if (bwrap === null) throw new SandboxUnavailableError('no bwrap on PATH');
  const root = process.getuid?.() === 0;
  const setpriv = root ? which('setpriv') : null;
  if (root && setpriv === null)
    throw new SandboxUnavailableError('running as root, and no setpriv (util-linux) to drop to nobody');
  const setup: SandboxSetup = { bwrap, setpriv, owner: root ? NOBODY : null };
  const sandbox = await Sandbox.create(setup, DEFAULT_LIMITS, base);
  try {
    const r = await sandbox.run('echo sandbox-ok > probe && cat probe');
    if (r.exitCode !== 0 || r.output.trim() !== 'sandbox-ok') {
      const reach = root ? ` (the sandbox runs as nobody: ${base}, TMPDIR, must be reachable by it)` : '';
      throw new SandboxUnavailableError(`bwrap failed (exit ${r.exitCode}): ${r.output.trim().slice(0, 300)}${reach}`);
    }
  } finally {
    await sandbox.destroy();
  }
  return setup;
}

/** The host's /bin, /lib... as the sandbox must see them: symlinks into /usr on merged-/usr systems. */
function systemDirs(): string[] {
  const args: string[] = [];
  for (const name of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    if (!existsSync(name)) continue;
    if (lstatSync(name).isSymbolicLink()) args.push('--symlink', readlinkSync(name), name);
    else args.push('--ro-bind', name, name);
  }
  return args;
}

export class Sandbox {
  private constructor(
    private readonly setup: SandboxSetup,
    readonly limits: SandboxLimits,
    /** The episode's folder on the host: home/ is the agent's /home/agent, tmp/ its /tmp. */
    readonly root: string,
  ) {}

  static async create(setup: SandboxSetup, limits: SandboxLimits, base = tmpdir()): Promise<Sandbox> {
    const root = await mkdtemp(join(parentFolder(base), 'episode-'));
    await mkdir(join(root, 'home'));
    await mkdir(join(root, 'tmp'));
    const sandbox = new Sandbox(setup, limits, root);
    await sandbox.own(root, ['home', 'tmp']);
    return sandbox;
  }

  get home(): string {
    return join(this.root, 'home');
  }

  /** Writes files under the agent's home (relative paths), owned by the sandbox's user. */
  async writeFiles(files: Readonly<Record<string, string>>, mode = 0o644): Promise<void> {
    for (const [path, text] of Object.entries(files)) {
      if (path.startsWith('/') || path.split('/').includes('..')) throw new Error(`bad sandbox path "${path}"`);
      const full = join(this.home, path);
      await mkdir(dirname(full), { recursive: true });
      await writeFile(full, text, { mode });
      let dir = dirname(path);
      const owned = [path];
      while (dir !== '.') {
        owned.push(dir);
        dir = dirname(dir);
      }
      await this.own(this.home, owned);
    }
  }

  private async own(parent: string, paths: string[]): Promise<void> {
    const owner = this.setup.owner;
    if (owner === null) return;
    await chown(parent, owner.uid, owner.gid);
    for (const p of paths) await chown(join(parent, p), owner.uid, owner.gid);
  }

  /** Runs a bash command inside the sandbox; `readOnly` binds more host folders read-only (host path to sandbox path). */
  run(command: string, readOnly: Readonly<Record<string, string>> = {}): Promise<CommandResult> {
    const l = this.limits;
    const bwrapArgs = [
      '--unshare-all',
      '--unshare-user',
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
      '--hostname',
      'sandbox',
      '--ro-bind',
      '/usr',
      '/usr',
      ...systemDirs(),
      '--ro-bind-try',
      '/etc/alternatives',
      '/etc/alternatives',
      '--ro-bind-try',
      '/etc/ld.so.cache',
      '/etc/ld.so.cache',
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '--bind',
      this.home,
      HOME,
      '--bind',
      join(this.root, 'tmp'),
      '/tmp',
      ...Object.entries(readOnly).flatMap(([host, inside]) => ['--ro-bind', host, inside]),
      // bwrap builds the new root on a tmpfs: read-only, or /etc or / would be writable (and unbounded).
      '--remount-ro',
      '/',
      '--chdir',
      HOME,
      '--clearenv',
      '--setenv',
      'PATH',
      '/usr/local/bin:/usr/bin:/bin',
      '--setenv',
      'HOME',
      HOME,
      '--setenv',
      'LANG',
      'C.UTF-8',
      '--setenv',
      'TERM',
      'dumb',
      // A .pyc is trusted while its source keeps its size and mtime second: an edit within the
      // second of the last run (a one-character fix) would run the old code.
      '--setenv',
      'PYTHONDONTWRITEBYTECODE',
      '1',
      '--',
      '/bin/bash',
      '-c',
      // Set inside the new user namespace, so the process count is this sandbox's alone.
      `ulimit -u ${l.processes} -v ${l.memoryMb * 1024} -f ${l.fileMb * 1024} -c 0 || exit 125; exec /bin/bash -c "$1"`,
      'sandbox',
      command,
    ];
    const [file, args] =
      this.setup.setpriv === null
        ? [this.setup.bwrap, bwrapArgs]
        : [
            this.setup.setpriv,
            [
              `--reuid=${NOBODY.uid}`,
              `--regid=${NOBODY.gid}`,
              '--clear-groups',
              '--inh-caps=-all',
              '--',
              this.setup.bwrap,
              ...bwrapArgs,
            ],
          ];
    return runBounded(file, args, l);
  }

  /** Bytes under the episode's folder; `over` when above the limit or too many entries to count. */
  async usage(maxEntries = 20_000): Promise<{ bytes: number; over: boolean }> {
    let bytes = 0;
    let entries = 0;
    const stack = [this.root];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
        if (++entries > maxEntries) return { bytes, over: true };
        const path = join(dir, entry.name);
        if (entry.isDirectory()) stack.push(path);
        else bytes += (await lstat(path).catch(() => ({ size: 0 }))).size;
      }
    }
    return { bytes, over: bytes > this.limits.directoryMb * 1024 * 1024 };
  }

  async destroy(): Promise<void> {
    try {
      await rm(this.root, { recursive: true, force: true });
    } catch {
      // The agent may have left folders without write permission: give them back, then remove.
      spawnSync('chmod', ['-R', 'u+rwX', this.root]);
      await rm(this.root, { recursive: true, force: true });
    }
  }
}

/** Spawns in a new process group and kills the whole group at the time or output limit. */
function runBounded(file: string, args: string[], l: SandboxLimits): Promise<CommandResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    // No host environment: bwrap's own process inside (PID 1) would show it in /proc/1/environ.
    const child = spawn(file, args, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/bin:/bin' },
    });
    const chunks: Buffer[] = [];
    let kept = 0;
    let truncated = false;
    let timedOut = false;
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, l.commandSeconds * 1000);
    const take = (d: Buffer) => {
      if (truncated) return;
      const room = l.outputBytes - kept;
      if (d.length > room) {
        chunks.push(d.subarray(0, room));
        kept = l.outputBytes;
        truncated = true;
        kill();
        return;
      }
      chunks.push(d);
      kept += d.length;
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({
        exitCode: timedOut || truncated ? null : code,
        output: Buffer.concat(chunks).toString('utf8'),
        truncated,
        timedOut,
        milliseconds: performance.now() - started,
      });
    });
  });
}

/** A command's result as the `bash` tool reports it to the model. */
export function describeResult(r: CommandResult, l: SandboxLimits): string {
  const notes: string[] = [];
  if (r.truncated) notes.push(`[output cut at ${l.outputBytes} bytes; the command was stopped]`);
  if (r.timedOut) notes.push(`[the command ran past ${l.commandSeconds} s and was killed]`);
  const status = r.exitCode === null ? 'killed' : `exit code ${r.exitCode}`;
  return [`${status}`, r.output, ...notes].filter((s) => s.length > 0).join('\n');
}
