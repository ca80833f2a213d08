// The benchmark's PNG: a valid file (signature, chunk CRCs, decodable pixels) whose lines land
// where the scores say, and the summary behind the table.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inflateSync } from 'node:zlib';
import { crc32, Raster } from '../src/sim/png.js';
import { plotScores } from '../src/sim/plot.js';
import { spread, summarize } from '../src/sim/report.js';
import type { ExperimentResult } from '../src/sim/experiment.js';

function decode(png: Buffer): { width: number; height: number; pixel(x: number, y: number): number[] } {
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let at = 8,
    width = 0,
    height = 0;
  const idat: Buffer[] = [];
  while (at < png.length) {
    const length = png.readUInt32BE(at),
      type = png.toString('ascii', at + 4, at + 8);
    assert.equal(png.readUInt32BE(at + 8 + length), crc32(png.subarray(at + 4, at + 8 + length)), `${type} CRC`);
    if (type === 'IHDR') {
      width = png.readUInt32BE(at + 8);
      height = png.readUInt32BE(at + 12);
    }
    if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const rows = inflateSync(Buffer.concat(idat));
  assert.equal(rows.length, (width * 3 + 1) * height);
  return {
    width,
    height,
    pixel: (x, y) => [...rows.subarray(y * (width * 3 + 1) + 1 + x * 3, y * (width * 3 + 1) + 4 + x * 3)],
  };
}

test('CRC-32 matches the standard check value', () => {
  assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926);
});

test('a raster round-trips through PNG pixel for pixel', () => {
  const img = new Raster(20, 10);
  img.rect(3, 2, 4, 3, [10, 200, 30]);
  const png = decode(img.png());
  assert.equal(png.width, 20);
  assert.deepEqual(png.pixel(4, 3), [10, 200, 30]);
  assert.deepEqual(png.pixel(0, 0), [255, 255, 255]);
});

test("each method's mean point is drawn in its color at its score", () => {
  const point = (step: number, score: number) => ({
    step,
    version: step,
    score,
    byUser: { student: score, teacher: score },
    probes: 1,
    outcomes: [],
    examples: { student: '', teacher: '' },
  });
  const run = (method: 'rl' | 'combine', scores: number[]): ExperimentResult => ({
    method,
    seed: 1,
    points: scores.map((s, i) => point(i * 4, s)),
    steps: [],
    trainingWallSeconds: 1,
    wallSeconds: 1,
    samplesTrained: 0,
    noSample: {},
    staleSamples: 0,
    conversations: 0,
    judgeVotes: { eval: 0, hint: 0, wrong: 0, unreadable: 0 },
  });
  const summary = summarize([run('rl', [0.2, 0.3]), run('combine', [0.2, 0.9])]);
  assert.deepEqual(
    summary.methods.map((m) => m.method),
    ['base', 'rl', 'combine'],
  );
  const png = decode(plotScores(summary, 'TEST'));
  // Geometry of plot.ts: x from 80 to width-200 over steps 0..4, y from height-60 (score 0) up to 50 (score 1).
  const y = (s: number) => Math.round(png.height - 60 - (png.height - 110) * s);
  assert.deepEqual(png.pixel(png.width - 200, y(0.9)), [30, 150, 70]);
  assert.deepEqual(png.pixel(png.width - 200, y(0.3)), [220, 120, 30]);
});

test('spread: mean, sample standard deviation, range', () => {
  const s = spread([0.2, 0.4, 0.6]);
  assert.ok(Math.abs(s.mean - 0.4) < 1e-12 && Math.abs(s.std - 0.2) < 1e-12);
  assert.deepEqual([s.min, s.max, s.n], [0.2, 0.6, 3]);
  assert.equal(spread([0.5]).std, 0);
});
