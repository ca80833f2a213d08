// Download progress: the records resolveModel reports, and the terminal renderer (one line redrawn
// with \r on a TTY, occasional plain lines otherwise).

import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { resolveModel, type Progress } from '../src/hub/index.js';
import { formatBytes, progressBar, renderLine } from '../src/hub/progress-bar.js';
import { HubDouble } from './helpers/hub-double.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';

delete process.env.HF_HUB_OFFLINE;

const model = makeTinyModel({ family: 'qwen3', shards: 2 });
let hub: HubDouble;
before(async () => {
  hub = await HubDouble.start([{ id: 'test/tiny', dir: model }]);
});
after(() => hub.close());

test('progress covers every file and adds up to the folder size', async () => {
  const events: Progress[] = [];
  const cacheDir = scratchDir('ocrl-hub-');
  hub.knobs = { chunkSize: 16384 };
  const dir = await resolveModel('test/tiny', {
    cacheDir,
    endpoint: hub.endpoint,
    token: '',
    onProgress: (p) => events.push(p),
  });
  hub.knobs = {};
  const sizes = Object.fromEntries(readdirSync(model).map((f) => [f, statSync(join(model, f)).size]));
  const total = Object.values(sizes).reduce((a, b) => a + b, 0);
  const last = events[events.length - 1]!;
  assert.equal(last.repoId, 'test/tiny');
  assert.equal(last.commit, hub.commit('test/tiny'));
  assert.equal(last.bytesDone, total);
  assert.equal(last.bytesTotal, total);
  assert.equal(last.filesDone, readdirSync(model).length);
  assert.equal(last.filesTotal, readdirSync(model).length);
  assert.deepEqual(Object.fromEntries(last.files.map((f) => [f.path, f.bytesTotal])), sizes);
  assert.ok(last.files.every((f) => f.state === 'done'));
  assert.ok(
    events.every((e) => e.bytesTotal === total && e.filesTotal === last.filesTotal),
    'the total is known from the first report',
  );
  for (let i = 1; i < events.length; i++) {
    assert.ok(events[i]!.bytesDone >= events[i - 1]!.bytesDone, 'bytes only grow without restarts');
    assert.ok(events[i]!.bytesDone <= events[i]!.bytesTotal);
  }
  assert.ok(
    events.some((e) => e.file.state === 'downloading' && e.file.bytesDone > 0 && e.file.bytesDone < e.file.bytesTotal),
    'mid-file updates',
  );
  assert.ok(events.some((e) => e.bytesPerSecond > 0));

  // Served from the cache: nothing to report.
  const again: Progress[] = [];
  assert.equal(
    await resolveModel('test/tiny', { cacheDir, endpoint: hub.endpoint, token: '', onProgress: (p) => again.push(p) }),
    dir,
  );
  assert.equal(again.length, 0);
});

function progress(done: number, total: number, extra: Partial<Progress> = {}): Progress {
  const file = {
    path: 'model-00001-of-00002.safetensors',
    bytesDone: done,
    bytesTotal: total,
    state: 'downloading' as const,
  };
  return {
    repoId: 'Qwen/Qwen3-0.6B',
    commit: 'c'.repeat(40),
    file,
    files: [file],
    bytesDone: done,
    bytesTotal: total,
    bytesPerSecond: 24.1e6,
    filesDone: 0,
    filesTotal: 1,
    ...extra,
  };
}

function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  return { writes, out: { isTTY, columns: 100, write: (s: string) => writes.push(s) } };
}

test('on a terminal: one line redrawn with \\r, at most ten times a second, ended by a newline', () => {
  let now = 0;
  const { writes, out } = fakeStream(true);
  const bar = progressBar(out, () => now);
  for (let i = 0; i <= 1000; i++) {
    now = i; // 1000 updates over one second
    bar.update(progress(i * 1000, 1_000_000));
  }
  bar.done();
  assert.ok(writes.length >= 10 && writes.length <= 13, `${writes.length} writes`);
  for (const w of writes.slice(0, -1)) {
    assert.ok(w.startsWith('\r') && w.endsWith('\x1b[K') && !w.includes('\n'));
    assert.ok(w.length - '\r\x1b[K'.length <= 99, 'fits the terminal width');
  }
  assert.equal(writes[writes.length - 1], '\n');
  assert.match(
    writes[writes.length - 2]!,
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the line ends with an escape sequence
    /^\rQwen\/Qwen3-0\.6B \[#{10}\] 100% {2}1\.00 MB\/1\.00 MB {2}24\.1 MB\/s {2}done {2}…\S+-of-00002\.safetensors\x1b\[K$/,
  );
});

test('in a log: a plain line per tenth, or every 15 s when slow', () => {
  let now = 0;
  const { writes, out } = fakeStream(false);
  const bar = progressBar(out, () => now);
  for (let i = 0; i <= 1000; i++) {
    now = i * 10;
    bar.update(progress(i * 1000, 1_000_000));
  }
  bar.done();
  assert.ok(writes.length >= 11 && writes.length <= 13, `${writes.length} lines`);
  assert.ok(writes.every((w) => w.endsWith('\n') && !w.includes('\r')));
  assert.equal(writes[0], 'downloading Qwen/Qwen3-0.6B: 0% (0 B of 1.00 MB, 0/1 files, 24.1 MB/s)\n');

  const slow = fakeStream(false);
  const slowBar = progressBar(slow.out, () => now);
  for (let t = 0; t <= 60_000; t += 100) {
    now = t;
    slowBar.update(progress(t, 1_000_000_000)); // far below a tenth in a minute
  }
  assert.equal(slow.writes.length, 5, 'the first line, then one per 15 s');
});

test('rendering details', () => {
  const line = renderLine(progress(512_300_000, 1_190_000_000, { bytesPerSecond: 24.1e6 }), 200);
  assert.match(
    line,
    /^Qwen\/Qwen3-0\.6B \[#{13}-{17}\] {2}43% {2}512\.3 MB\/1\.19 GB {2}24\.1 MB\/s {2}29s {2}model-00001-of-00002\.safetensors$/,
  );
  assert.ok(renderLine(progress(1, 2), 50).length <= 50);
  assert.doesNotMatch(renderLine(progress(1, 2), 70), /model-/, 'the file name gives way first');
  assert.match(renderLine(progress(1, 2), 70), /\[#{5}-{5}\]/);
  assert.match(renderLine(progress(0, 10e9, { bytesPerSecond: 1e6 }), 200), / 2h46m /);
  assert.match(renderLine(progress(0, 10e9, { bytesPerSecond: 0 }), 200), / -- /);
  assert.deepEqual([0, 999, 1000, 1_234_567, 12_345_678_901].map(formatBytes), [
    '0 B',
    '999 B',
    '1.00 kB',
    '1.23 MB',
    '12.3 GB',
  ]);
});
