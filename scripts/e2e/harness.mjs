// Process handling for the end-to-end runs (scripts/e2e-openclaw.mjs and its scenarios): every
// long-lived child is a process-group leader, killed as a group (with the strays that left it), a
// command runner with a timeout, free ports and readiness polling.

import { spawn } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer } from 'node:net';

const T0 = Date.now();
const seconds = () => ((Date.now() - T0) / 1000).toFixed(0).padStart(3);
export const say = (line) => console.log(`[${seconds()} s] ${line}`);
export const elapsedSeconds = () => seconds().trim();

const groups = new Set();
let cleaningUp = null;

export function startGroup(name, command, args, { env, log, cwd } = {}) {
  const out = createWriteStream(log, { flags: 'a' });
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  const entry = { name, child, pid: child.pid, exited: false };
  child.on('exit', () => {
    entry.exited = true;
  });
  child.on('error', (e) => {
    entry.exited = true;
    out.write(`spawn error: ${e.message}\n`);
  });
  groups.add(entry);
  return entry;
}

function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Descendants of pid (from /proc), with their start times so a reused pid is never touched. */
function descendants(pid) {
  const children = new Map();
  const starts = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      starts.set(Number(name), fields[19]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(name));
    } catch {
      /* exited meanwhile */
    }
  }
  const out = [];
  const stack = [pid];
  while (stack.length)
    for (const c of children.get(stack.pop()) ?? []) {
      out.push({ pid: c, start: starts.get(c) });
      stack.push(c);
    }
  return out;
}

/** Live processes other than this one whose command line or environment names `dir` (ours, by HOME or --data). */
export function leftovers(dir) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const environ = readFileSync(`/proc/${name}/environ`, 'utf8');
      const state = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (state.slice(state.lastIndexOf(')') + 2).startsWith('Z')) continue; // a zombie has released everything
      if (cmdline.includes(dir) || environ.includes(dir)) out.push({ pid: Number(name), cmdline });
    } catch {
      /* exited meanwhile, or not ours to read */
    }
  }
  return out;
}

function sameProcess({ pid, start }) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] === start;
  } catch {
    return false;
  }
}

export async function stopGroup(entry, graceMs = 15000) {
  // Children that left the group (setsid, e.g. OpenClaw's spawn broker) are found by parentage.
  const family = descendants(entry.pid);
  const stopped = await stopGroupOnly(entry, graceMs);
  const strays = family.filter(sameProcess);
  for (const p of strays)
    try {
      process.kill(p.pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  if (strays.length) await sleep(1000);
  for (const p of strays.filter(sameProcess))
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  return stopped && !strays.some(sameProcess);
}

async function stopGroupOnly(entry, graceMs) {
  if (!groupAlive(entry.pid)) {
    groups.delete(entry);
    return true;
  }
  try {
    process.kill(-entry.pid, 'SIGTERM');
  } catch {
    /* gone */
  }
  const until = Date.now() + graceMs;
  while (Date.now() < until && groupAlive(entry.pid)) await sleep(200);
  if (groupAlive(entry.pid)) {
    try {
      process.kill(-entry.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await sleep(300);
  }
  groups.delete(entry);
  return !groupAlive(entry.pid);
}

export function cleanup() {
  cleaningUp ??= (async () => {
    for (const entry of [...groups].reverse()) await stopGroup(entry);
  })();
  return cleaningUp;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping everything`);
    void cleanup().finally(() => process.exit(130));
  });
}
process.on('exit', () => {
  // Last resort (e.g. process.exit from elsewhere): no waiting possible, just kill.
  for (const entry of groups)
    try {
      process.kill(-entry.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
});

/** Runs a command to completion in its own group, with a timeout that kills the group. */
export function runCommand(command, args, { env, cwd, timeoutMs = 120000, input } = {}) {
  return new Promise((resolvePromise) => {
    const child = spawn(command, args, {
      cwd,
      env,
      detached: true,
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const entry = { name: `${command} ${args[0] ?? ''}`, child, pid: child.pid, exited: false };
    groups.add(entry);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    if (input !== undefined) child.stdin.end(input);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, timeoutMs);
    const done = (code, error) => {
      clearTimeout(timer);
      // Its group may hold children that outlived it.
      void stopGroup(entry, 2000).then(() =>
        resolvePromise({
          code: timedOut ? 124 : code,
          stdout,
          stderr: error ? `${stderr}${error.message}` : stderr,
          timedOut,
        }),
      );
    };
    child.on('error', (e) => done(127, e));
    child.on('close', (code) => done(code ?? 1));
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePromise(port));
    });
  });
}

export async function waitFor(what, probe, timeoutMs, entry = null) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (entry?.exited) throw new Error(`${what}: the process exited (see its log)`);
    try {
      if (await probe()) return;
    } catch {
      /* not yet */
    }
    await sleep(300);
  }
  throw new Error(`${what}: not ready after ${timeoutMs / 1000} s`);
}

/**
 * OpenClaw reports a failed model call in the reply text ("⚠️ rl/main-model request failed ...").
 * Its notice that a reply hit max_tokens ("⚠️ Reply truncated at the model's output token limit")
 * is not an error: the e2e model's replies are short and may be cut.
 */
export function providerError(reply) {
  const notices = reply.replace(/⚠️ Reply truncated at the model's output token limit\.[^\n]*/g, '');
  if (
    /request failed|provider (internal )?error|LLM request failed|rejected the request|Request failed after repeated|compaction required but failed|⚠️/i.test(
      notices,
    )
  )
    return `provider error in the reply: ${reply.slice(0, 200)}`;
  return null;
}

export function readServeLog(logs) {
  return readFileSync(join(logs, 'serve.log'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter(Boolean);
}
