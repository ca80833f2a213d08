// The terminal environment's sandbox: what a hostile or careless command can do, and what it cannot:
// read or write outside its folder, reach the network, outlive its time limit, fork without bound,
// flood the runner with output, take unbounded memory or write an unbounded file. Each attack must
// fail, quickly, and leave the host and the sandbox itself in working order.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_LIMITS,
  describeResult,
  probeSandbox,
  Sandbox,
  SandboxUnavailableError,
  type SandboxLimits,
} from '../src/env/sandbox.js';

const setup = await probeSandbox();
const LIMITS: SandboxLimits = { ...DEFAULT_LIMITS, commandSeconds: 3, processes: 32, memoryMb: 256, fileMb: 1 };

async function withSandbox(f: (s: Sandbox) => Promise<void>, limits = LIMITS): Promise<void> {
  const s = await Sandbox.create(setup, limits);
  try {
    await f(s);
  } finally {
    await s.destroy();
  }
  assert.equal(existsSync(s.root), false, 'the episode folder is removed');
}

/** Host processes whose command line contains `marker` (the sandbox's PID namespace hides nothing from the host). */
function processesWith(marker: string): number {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker)) n++;
    } catch {
      // The process ended meanwhile.
    }
  }
  return n;
}

test('without bubblewrap the sandbox refuses to start and names the package', async () => {
  const path = process.env.PATH;
  process.env.PATH = mkdtempSync(join(tmpdir(), 'ocrl-empty-path-'));
  try {
    await assert.rejects(
      probeSandbox(),
      (e: Error) => e instanceof SandboxUnavailableError && /apt-get install bubblewrap/.test(e.message),
    );
  } finally {
    process.env.PATH = path;
  }
});

test('files persist in the folder between commands, and nothing outside it is reachable', async () => {
  const outside = mkdtempSync(join(tmpdir(), 'ocrl-outside-'));
  // The checkout this test runs from: a host folder the agent must not write either.
  const inCheckout = join(process.cwd(), 'escaped-from-sandbox');
  writeFileSync(join(outside, 'secret'), 'host secret\n');
  const passwd = createHash('sha256').update(readFileSync('/etc/passwd')).digest('hex');
  await withSandbox(async (s) => {
    const write = await s.run('echo kept > notes.txt && mkdir -p sub && echo deep > sub/x');
    assert.equal(write.exitCode, 0, write.output);
    assert.equal((await s.run('cat notes.txt sub/x; pwd')).output, 'kept\ndeep\n/home/agent\n');
    assert.equal(readFileSync(join(s.home, 'notes.txt'), 'utf8'), 'kept\n');

    const attacks = [
      `cat ${outside}/secret`,
      `cat ../../..${outside}/secret`,
      `echo planted > ${outside}/planted`,
      'cat /etc/passwd',
      'echo "evil:x:0:0::/:/bin/sh" >> /etc/passwd',
      `touch ${inCheckout}`,
      'touch /escaped',
      'touch /usr/escaped',
      `ls ${s.root}`,
    ];
    for (const attack of attacks) {
      const r = await s.run(attack);
      assert.notEqual(r.exitCode, 0, `${attack} succeeded: ${r.output}`);
      assert.doesNotMatch(r.output, /host secret|root:x:0/, attack);
    }
    // The host's environment (API keys live there) does not leak, not even through bwrap's own process.
    process.env.OCRL_SANDBOX_TEST_SECRET = 'env-secret-4417';
    const environ = await s.run('cat /proc/*/environ | tr "\\0" "\\n"; env');
    delete process.env.OCRL_SANDBOX_TEST_SECRET;
    assert.doesNotMatch(environ.output, /env-secret-4417/);
    assert.match(environ.output, /HOME=\/home\/agent/);
    // Only the sandbox's own processes are visible.
    const pids = await s.run('ls /proc | grep -c "^[0-9]"');
    assert.ok(Number(pids.output.trim()) <= 4, `sees ${pids.output.trim()} processes`);
  });
  assert.deepEqual(readdirSync(outside), ['secret']);
  assert.equal(existsSync(inCheckout), false);
  assert.equal(existsSync('/escaped'), false);
  assert.equal(createHash('sha256').update(readFileSync('/etc/passwd')).digest('hex'), passwd);
});

test('there is no network, not even to a server on the host loopback', async () => {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.end('hello from the host\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  try {
    await withSandbox(async (s) => {
      const r = await s.run(`exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3`);
      assert.notEqual(r.exitCode, 0, r.output);
      assert.doesNotMatch(r.output, /hello from the host/);
      const ifaces = await s.run('cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "');
      assert.equal(ifaces.output.trim(), 'lo', 'only a loopback of its own');
    });
  } finally {
    server.close();
  }
  assert.equal(connections, 0);
});

test('a fork bomb hits the process limit, dies with the command, and the sandbox keeps working', async () => {
  await withSandbox(async (s) => {
    const started = performance.now();
    const r = await s.run('bomb() { bomb | bomb & }; bomb; sleep 9171');
    const seconds = (performance.now() - started) / 1000;
    assert.ok(seconds < LIMITS.commandSeconds + 3, `took ${seconds.toFixed(1)} s`);
    assert.notEqual(r.exitCode, 0);
    assert.match(r.output, /fork: (retry: )?Resource temporarily unavailable/, 'the process limit stopped it');
    assert.equal(processesWith('sleep 9171'), 0, 'nothing of it survives');
    assert.equal((await s.run('echo alive')).output, 'alive\n');
  });
});

test('a command past its time limit is killed with every process it started', async () => {
  await withSandbox(async (s) => {
    const started = performance.now();
    const r = await s.run('(sleep 9272 &); sleep 9273 & sleep 9274');
    const seconds = (performance.now() - started) / 1000;
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, null);
    assert.ok(seconds < LIMITS.commandSeconds + 2, `took ${seconds.toFixed(1)} s`);
    assert.match(describeResult(r, LIMITS), /ran past 3 s and was killed/);
    assert.equal(processesWith('sleep 927'), 0);
  });
});

test('runaway output is cut at the limit, the command stopped, and the cut said', async () => {
  await withSandbox(async (s) => {
    const started = performance.now();
    const r = await s.run('yes ocrl-runaway-7731');
    assert.ok(performance.now() - started < 3000, 'stopped at once, not at the time limit');
    assert.equal(r.truncated, true);
    assert.equal(r.timedOut, false);
    assert.equal(Buffer.byteLength(r.output), LIMITS.outputBytes);
    assert.match(
      describeResult(r, LIMITS),
      /^killed\nocrl-runaway-7731\n[\s\S]*\[output cut at 16384 bytes; the command was stopped\]$/,
    );
    assert.equal(processesWith('ocrl-runaway-7731'), 0);
  });
});

test('memory per process and file size are bounded', async () => {
  await withSandbox(async (s) => {
    const memory = await s.run('python3 -c "b = bytearray(1024 ** 3); print(len(b))"');
    assert.notEqual(memory.exitCode, 0);
    assert.match(memory.output, /MemoryError/);
    const file = await s.run('head -c 5000000 /dev/zero > big; echo $?');
    assert.notEqual(file.output.trim(), '0', 'the write was stopped');
    assert.ok(statSync(join(s.home, 'big')).size <= LIMITS.fileMb * 1024 * 1024);
    const usage = await s.usage();
    assert.ok(usage.bytes >= LIMITS.fileMb * 1024 * 1024 && !usage.over);
  });
});
