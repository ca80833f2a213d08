// The prompt encoder: piecewise ids (cached between added tokens) equal the whole text's ids; the
// check against a full encode runs synchronously, or off the event loop on a checker thread, and
// one mismatch turns the cache off for good.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TextTokenizer } from '../src/chat/tokenizer/tokenizer.js';
import { RECYCLE_CHARS, TokenizerThread, type WholeEncodeCheck } from '../src/chat/tokenizer-thread.js';
import { PromptEncoder } from '../src/chat/prompt-encoder.js';
import { tinyModel } from './helpers/gateway.js';

const dir = tinyModel();
const tokenizer = await TextTokenizer.fromModelDir(dir);
const prompt = (turns: number) => {
  let text = '<|im_start|>system\nYou are helpful. Keep answers short.<|im_end|>\n';
  for (let k = 0; k < turns; k++)
    text += `<|im_start|>user\nquestion ${k}: how far is it?<|im_end|>\n<|im_start|>assistant\nabout ${k * 7} km<|im_end|>\n`;
  return `${text}<|im_start|>assistant\n`;
};

/** A tokenizer double whose whole-text encoding differs from the piecewise one (an extra id). */
class DriftingTokenizerDouble {
  wholeCalls = 0;
  encode(text: string): number[] {
    const ids = tokenizer.encode(text);
    if (text.includes('<|im_start|>')) {
      this.wholeCalls++;
      return [...ids, 0];
    }
    return ids;
  }
}

test('piecewise ids equal the whole encoding, from the cache too, and the result is a fresh array', () => {
  const encoder = PromptEncoder.forModelDir(dir, tokenizer);
  for (const turns of [0, 3, 4, 12]) {
    const first = encoder.encode(prompt(turns));
    assert.deepEqual(first, tokenizer.encode(prompt(turns)), `${turns} turns`);
    first.push(-1); // callers own what they get
    assert.deepEqual(encoder.encode(prompt(turns)), tokenizer.encode(prompt(turns)), `${turns} turns, cached`);
  }
  assert.ok(encoder.caching);
});

test('a synchronous check that finds a mismatch returns the whole encoding and turns the cache off', () => {
  const drifting = new DriftingTokenizerDouble();
  const told: string[] = [];
  const encoder = new PromptEncoder(
    drifting as unknown as TextTokenizer,
    [{ content: '<|im_start|>' }, { content: '<|im_end|>' }],
    { onMismatch: (d) => told.push(d) },
  );
  const ids = encoder.encode(prompt(2));
  assert.equal(ids.at(-1), 0, 'the whole encoding');
  assert.equal(encoder.caching, false);
  assert.match(told[0]!, /piecewise encoding differs from the whole .*prompt caching is off/);
});

test('with a checker, the request goes on with piecewise ids and a mismatch found later turns the cache off', async () => {
  const told: string[] = [];
  const checked: string[] = [];
  let answer: (same: boolean) => void = () => {};
  const checkDouble: WholeEncodeCheck = (text) => {
    checked.push(text);
    return new Promise((resolve) => {
      answer = (same) => resolve({ same, wholeLength: 1 });
    });
  };
  const encoder = PromptEncoder.forModelDir(dir, tokenizer, { check: checkDouble, onMismatch: (d) => told.push(d) });
  const ids = encoder.encode(prompt(2));
  assert.deepEqual(ids, tokenizer.encode(prompt(2)));
  assert.deepEqual(checked, [prompt(2)], 'checked elsewhere, not here');
  assert.ok(encoder.caching, 'still on until the check answers');
  answer(false);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(encoder.caching, false);
  assert.match(told[0]!, /in a request already served; prompt caching is off/);
});

test('the tokenizer thread checks whole texts with the model tokenizer', async () => {
  const checker = TokenizerThread.start(dir);
  try {
    const text = prompt(5);
    const ids = tokenizer.encode(text);
    assert.deepEqual(await checker.check(text, ids), { same: true, wholeLength: ids.length });
    assert.deepEqual(await checker.check(text, [...ids, 1]), { same: false, wholeLength: ids.length });
  } finally {
    await checker.close();
  }
  await assert.rejects(checker.check('x', [1]), /tokenizer thread is closed/);
});

test('the tokenizer thread encodes pieces, counts what cannot fit without encoding it, and ends after a large job', async () => {
  const thread = TokenizerThread.start(dir);
  try {
    const pieces = ['hello there', 'general kenobi'];
    assert.deepEqual(await thread.encode(pieces, 1000), { ids: pieces.map((p) => tokenizer.encode(p)) });
    assert.deepEqual(await thread.encode(['x'], 1000, prompt(1)), { ids: [tokenizer.encode(prompt(1))] });
    const words = 'word '.repeat(5000);
    const r = await thread.encode([words], 4096);
    assert.ok(
      'atLeast' in r && r.atLeast >= 4096 && r.atLeast <= tokenizer.encode(words).length,
      JSON.stringify(r).slice(0, 80),
    );
    assert.ok(thread.running);
    await thread.encode(['a '.repeat(RECYCLE_CHARS / 2 + 1)], 10);
    assert.equal(thread.running, false, 'a job over RECYCLE_CHARS ends the thread, returning its heap');
    assert.deepEqual(
      await thread.encode(['again'], 10),
      { ids: [tokenizer.encode('again')] },
      'the next job starts a new one',
    );
  } finally {
    await thread.close();
  }
});

test('a tokenizer thread over a folder it cannot load answers each job with the load error', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'ocrl-no-tokenizer-'));
  const thread = TokenizerThread.start(empty);
  try {
    const jobs = [thread.encode(['hello'], 10), thread.check('hello', [1])];
    for (const job of jobs) await assert.rejects(job, /tokenizer\.json/);
    assert.ok(thread.running, 'the thread stays up and answers the next job too');
    await assert.rejects(thread.encode(['again'], 10), /tokenizer\.json/);
  } finally {
    await thread.close();
    rmSync(empty, { recursive: true, force: true });
  }
});
