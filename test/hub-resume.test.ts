// Interrupted, corrupted and concurrent downloads against the Hub double: a broken connection is
// resumed with a Range request (within a call, and by the next call or process), a flipped byte is
// caught and fetched again once, and two processes filling one cache at once leave it intact.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type HubError, resolveModel, type ResolveOptions } from '../src/hub/index.js';
import { HubDouble, sha256 } from './helpers/hub-double.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';

delete process.env.HF_HUB_OFFLINE;

const model = makeTinyModel({ family: 'qwen3', shards: 3 });
const SHARD = 'model-00002-of-00003.safetensors';
const shardBytes = readFileSync(join(model, SHARD));
let hub: HubDouble;

before(async () => {
  hub = await HubDouble.start([{ id: 'test/tiny', dir: model }]);
});
afterEach(() => {
  hub.knobs = {};
});
after(() => hub.close());

const opts = (extra: ResolveOptions = {}): ResolveOptions => ({
  cacheDir: scratchDir('ocrl-hub-'),
  endpoint: hub.endpoint,
  token: '',
  retryDelayMs: 5,
  ...extra,
});

function assertSameFolder(dir: string): void {
  for (const name of readdirSync(model))
    assert.ok(readFileSync(join(dir, name)).equals(readFileSync(join(model, name))), `${name} is byte-identical`);
}

function leftovers(cacheDir: string): string[] {
  return readdirSync(join(cacheDir, 'models--test--tiny', 'blobs')).filter((n) => n.includes('.'));
}

const rangesFor = (from: number) =>
  hub.requests
    .slice(from)
    .filter((r) => r.server === 'cdn' && r.path.includes(sha256(shardBytes)) && r.range)
    .map((r) => r.range);

test('a connection dropped mid-file fails the call, and the next call resumes with a Range request', async () => {
  const o = opts({ retries: 0 });
  const cut = 40_000;
  assert.ok(shardBytes.length > 2 * cut);
  hub.knobs.drop = { path: SHARD, afterBytes: cut, times: 1 };
  await assert.rejects(
    resolveModel('test/tiny', o),
    (e: HubError) =>
      e.code === 'network' &&
      new RegExp(
        `downloading ${SHARD} of test/tiny from 127\\.0\\.0\\.1:\\d+ failed .*the ${cut} of ${shardBytes.length} bytes received are kept`,
      ).test(e.message),
  );
  // Shards downloading alongside were stopped too, and may have parked partials of their own.
  assert.ok(
    leftovers(o.cacheDir!).includes(`${sha256(shardBytes)}.resume.incomplete`),
    'the partial is parked for the next run',
  );
  const seen = hub.requests.length;
  const servedBefore = hub.served(SHARD);
  assertSameFolder(await resolveModel('test/tiny', o));
  assert.deepEqual(rangesFor(seen), [`bytes=${cut}-`]);
  assert.equal(hub.served(SHARD) - servedBefore, shardBytes.length - cut, 'only the rest was sent');
  assert.deepEqual(leftovers(o.cacheDir!), []);
});

test('within one call, broken transfers are retried from where they stopped', async () => {
  const o = opts();
  const seen = hub.requests.length;
  hub.knobs.drop = { path: SHARD, afterBytes: 30_000, times: 2 };
  assertSameFolder(await resolveModel('test/tiny', o));
  assert.deepEqual(rangesFor(seen), ['bytes=30000-', 'bytes=60000-']);
});

test('a server that ignores Range gets the file from the start again', async () => {
  const o = opts();
  hub.knobs.drop = { path: SHARD, afterBytes: 30_000, times: 1 };
  hub.knobs.ignoreRange = true;
  const servedBefore = hub.served(SHARD);
  assertSameFolder(await resolveModel('test/tiny', o));
  assert.equal(hub.served(SHARD) - servedBefore, 30_000 + shardBytes.length);
});

test('a corrupted download is deleted and fetched once more', async () => {
  const o = opts();
  hub.knobs.corrupt = { path: SHARD, times: 1 };
  const servedBefore = hub.served(SHARD);
  assertSameFolder(await resolveModel('test/tiny', o));
  assert.equal(hub.served(SHARD) - servedBefore, 2 * shardBytes.length);
});

test('corrupted twice: a clear error, and nothing of that file in the cache', async () => {
  const o = opts();
  hub.knobs.corrupt = { path: SHARD, times: 2 };
  await assert.rejects(
    resolveModel('test/tiny', o),
    (e: HubError) =>
      e.code === 'checksum' &&
      new RegExp(
        `${SHARD} of test/tiny@[0-9a-f]{40} failed its check twice \\(sha256 [0-9a-f]{64}, listed ${sha256(shardBytes)}\\)`,
      ).test(e.message),
  );
  const root = join(o.cacheDir!, 'models--test--tiny');
  assert.ok(!existsSync(join(root, 'blobs', sha256(shardBytes))));
  assert.deepEqual(leftovers(o.cacheDir!), []);
  assert.ok(!existsSync(join(root, 'refs', 'main')), 'no ref to an incomplete snapshot');
  assertSameFolder(await resolveModel('test/tiny', o)); // and a later run repairs it
});

test('an abort stops the download, keeps the partial, and the next call resumes', async () => {
  const o = opts();
  hub.knobs = { chunkSize: 4096, chunkDelayMs: 5 };
  const controller = new AbortController();
  const seen = hub.requests.length;
  const run = resolveModel('test/tiny', {
    ...o,
    signal: controller.signal,
    onProgress: (p) => {
      if (p.file.path === SHARD && p.file.bytesDone >= 20_000) controller.abort();
    },
  });
  await assert.rejects(run, (e: Error) => e.name === 'AbortError');
  assert.ok(leftovers(o.cacheDir!).includes(`${sha256(shardBytes)}.resume.incomplete`));
  hub.knobs = {};
  assertSameFolder(await resolveModel('test/tiny', o));
  const ranges = rangesFor(seen);
  assert.equal(ranges.length, 1);
  assert.ok(Number(/bytes=(\d+)-/.exec(ranges[0]!)![1]) >= 20_000);
  assert.deepEqual(leftovers(o.cacheDir!), []);
});

// A child process resolving into the same cache, as `openclaw-rl serve` would.
const HUB_MODULE = pathToFileURL(fileURLToPath(new URL('../src/hub/index.js', import.meta.url))).href;
function child(cacheDir: string) {
  const code = `const { resolveModel } = await import(process.env.HUB_MODULE);
    process.stdout.write(await resolveModel('test/tiny', { cacheDir: process.env.CACHE, endpoint: process.env.ENDPOINT, token: '', retryDelayMs: 5 }));`;
  const proc = spawn(process.execPath, ['--input-type=module', '-e', code], {
    env: { ...process.env, HUB_MODULE, CACHE: cacheDir, ENDPOINT: hub.endpoint },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (err += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }>(
    (resolve) => proc.on('exit', (code, signal) => resolve({ code, signal, out, err })),
  );
  return { proc, exit };
}

test('two processes downloading into one cache at once both get an intact model', async () => {
  const o = opts();
  hub.knobs = { chunkSize: 8192, chunkDelayMs: 2 };
  const other = child(o.cacheDir!);
  const [mine, theirs] = await Promise.all([resolveModel('test/tiny', o), other.exit]);
  assert.equal(theirs.code, 0, theirs.err);
  assert.equal(theirs.out, mine);
  assertSameFolder(mine);
  assert.deepEqual(leftovers(o.cacheDir!), []);
});

test('the partial of a killed process is adopted and resumed', async () => {
  const o = opts();
  hub.knobs = { chunkSize: 4096, chunkDelayMs: 10 };
  const seen = hub.requests.length;
  const servedBefore = hub.served(SHARD);
  const victim = child(o.cacheDir!);
  while (hub.served(SHARD) - servedBefore < 30_000) await new Promise((r) => setTimeout(r, 5));
  victim.proc.kill('SIGKILL'); // like a second Ctrl-C: no cleanup runs
  assert.equal((await victim.exit).signal, 'SIGKILL');
  hub.knobs = {};
  assertSameFolder(await resolveModel('test/tiny', o));
  const ranges = rangesFor(seen);
  assert.equal(ranges.length, 1, 'resumed, not restarted');
  assert.ok(Number(/bytes=(\d+)-/.exec(ranges[0]!)![1]) >= 20_000);
  assert.deepEqual(leftovers(o.cacheDir!), []);
});
