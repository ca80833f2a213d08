// SIGTERM while `openclaw-rl serve` trains a batch that would run for minutes: the process ends
// within seconds, exits cleanly, and loses nothing committed (the batch's samples stay queued and
// no step is recorded for it).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChatMessage } from '../src/chat/messages.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { judgedServeArgs, startServe } from './helpers/serve-process.js';

test("SIGTERM during a long training batch ends serve within seconds; the batch's samples stay queued", async (t) => {
  const judge = await startJudgeDouble();
  judge.force = '1';
  t.after(() => judge.close());
  const data = freshDir('shutdown-');
  // 100000 passes over a batch of two samples: far longer than any test may wait.
  const config = join(data, 'serve.json');
  writeFileSync(config, JSON.stringify({ training: { epochs: 100_000 } }));
  const serve = await startServe(judgedServeArgs({ data, judgeUrl: judge.url, votes: 1 }, ['--config', config]));
  t.after(() => {
    serve.child.kill('SIGKILL');
  });
  const messages: ChatMessage[] = [];
  for (let i = 0; i < 3; i++) {
    messages.push({ role: 'user', content: `Question ${i}: how much is ${i} plus ${i}?` });
    const res = await fetch(`${serve.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'long-batch' },
      body: JSON.stringify({ model: 'main-model', messages, max_tokens: 4 }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: { message: ChatMessage }[] };
    messages.push({ role: 'assistant', content: body.choices[0]!.message.content ?? '' });
  }
  const started = await serve.waitForLog((l) => l.event === 'batch_started');
  assert.equal(started.samples, 2);
  const t0 = performance.now();
  serve.child.kill('SIGTERM');
  const killed = setTimeout(() => serve.child.kill('SIGKILL'), 10_000);
  const code = await serve.exited;
  clearTimeout(killed);
  const seconds = (performance.now() - t0) / 1000;
  assert.ok(seconds < 5, `serve took ${seconds.toFixed(1)} s to stop during a batch (SIGKILL after 10 s)`);
  assert.equal(code, 0, serve.stderr().slice(-2000));
  assert.ok(serve.lines.some((l) => l.event === 'stopped'));
  assert.ok(!serve.lines.some((l) => l.event === 'batch_trained' || l.event === 'trainer_failed'));
  const store = openStore({ dir: data, recoverQueue: false });
  try {
    assert.equal(store.learning.queuedCount(), 2, 'the interrupted batch is trained after the next start');
    assert.equal(store.learning.steps().length, 0);
  } finally {
    store.close();
  }
});
