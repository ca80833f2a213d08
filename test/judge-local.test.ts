// The self-judge over the embedded engine, on a generated tiny model (random weights: it writes
// gibberish). It returns text, always samples from version 0 (the frozen base) even after a new
// policy version is published, and gibberish becomes unparseable votes and a 0 majority.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderPrompt } from '../src/chat/prompt.js';
import { loadChatModel } from '../src/cli/chat-model.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import type { GenerationEvent, SamplingParams } from '../src/engine/types.js';
import { judgeTurn } from '../src/judge/judge-turn.js';
import { LocalJudgeClient, type SelfJudgeModel } from '../src/judge/local-client.js';
import { buildEvalPrompt } from '../src/judge/prompts.js';
import { makeClosedTurn } from './helpers/judge-double.js';
import { makeTinyModel } from './helpers/models.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 5 });
const closed = makeClosedTurn({ request: 'What is 2 + 2?', reply: '4', next: [{ role: 'user', content: 'Thanks!' }] });
const prompt = buildEvalPrompt(closed.turn, closed.nextState!);

test('self-judge: text from version 0, unchanged by a published LoRA version; gibberish abstains', async () => {
  const model = await loadChatModel(dir);
  try {
    // Records what the judge asks the engine for and which version answered.
    const calls: { params: SamplingParams; finishVersion: number | null }[] = [];
    const recording: SelfJudgeModel = {
      ...model,
      engine: {
        generate(ids, params, signal) {
          const call = { params, finishVersion: null as number | null };
          calls.push(call);
          const inner = model.engine.generate(ids, params, signal);
          return (async function* (): AsyncGenerator<GenerationEvent> {
            for await (const e of inner) {
              if (e.type === 'finish') call.finishVersion = e.version;
              yield e;
            }
          })();
        },
      },
    };
    const judge = new LocalJudgeClient(recording);
    assert.equal(judge.name, 'self:base');
    const opts = { temperature: 0.6, maxTokens: 24, seed: 9 };
    const before = await judge.complete(prompt, opts);
    assert.equal(typeof before, 'string');
    assert.ok(before.length > 0, 'the tiny model wrote something');

    // A new policy version changes what the serving version writes, but not the judge.
    const cfg = readModelFolder(dir).config;
    const lora = new Lora(cfg, { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] });
    lora.initialise(3);
    const rng = createRng(4);
    for (const t of lora.tensors)
      if (t.part === 'B')
        lora.view(t).forEach((_, i, v) => {
          v[i] = (rng.next() - 0.5) * 2;
        });
    await model.engine.publish({ version: 1, kind: 'lora', spec: lora.spec, data: lora.data });
    assert.equal(model.engine.version, 1);
    const rendered = renderPrompt(model.template, model.tokenizer, prompt, {
      addGenerationPrompt: true,
      enableThinking: false,
    });
    const serving: number[] = [];
    for await (const e of model.engine.generate(rendered.ids, { temperature: 0.6, maxTokens: 24, seed: 9 }))
      if (e.type === 'token') serving.push(e.token.id);
    assert.notEqual(
      model.tokenizer.decode(serving, { skipSpecialTokens: true }),
      before,
      'the published version should write something else',
    );

    const after = await judge.complete(prompt, opts);
    assert.equal(after, before, 'same seed, same frozen base, same answer');
    assert.deepEqual(
      calls.map((c) => [c.params.version, c.finishVersion]),
      [
        [0, 0],
        [0, 0],
      ],
    );
    assert.equal(calls[0]!.params.temperature, 0.6);

    // Gibberish has no \boxed{}: every vote is unparseable and keeps its text; the majority abstains.
    const j = await judgeTurn(judge, closed, { votes: 3, hintVotes: 1, maxTokens: 16, seed: 1, timeoutMs: 30_000 });
    assert.equal(j.judge, 'self:base');
    assert.equal(j.score, 0);
    assert.equal(j.agreement, null);
    assert.equal(j.hint, null);
    for (const v of [...j.evalVotes, ...j.hintVotes]) {
      assert.equal(v.failure, 'unparseable');
      assert.equal(v.score, null);
      assert.equal(typeof v.raw, 'string');
    }
    assert.ok(calls.slice(2).every((c) => c.params.version === 0 && c.finishVersion === 0));
    assert.equal(calls.length, 2 + 4);
  } finally {
    await model.engine.close();
  }
});

test('self-judge: a prompt longer than the context is a vote failure that says what to change; an abort rejects', async () => {
  const model = await loadChatModel(dir);
  try {
    const judge = new LocalJudgeClient(model);
    const long = makeClosedTurn({ request: 'word '.repeat(20_000), next: [{ role: 'user', content: 'ok' }] });
    const j = await judgeTurn(judge, long, {
      votes: 1,
      hintVotes: 0,
      maxTokens: 8,
      limits: { requestChars: 100_000, responseChars: 10, toolArgumentChars: 10, nextStateChars: 10 },
    });
    assert.equal(j.evalVotes[0]!.failure, 'error');
    assert.match(
      j.evalVotes[0]!.detail!,
      /the self-judge failed: prompt is \d+ tokens, the model's context is 2048; lower the judge prompt limits/,
    );
    assert.equal(j.evalVotes[0]!.attempts, 1, 'not transient: not retried');

    const stop = new AbortController();
    const reason = new Error('shutdown');
    stop.abort(reason);
    await assert.rejects(
      judge.complete(prompt, { temperature: 0.6, maxTokens: 8, signal: stop.signal }),
      (e) => e === reason,
    );
  } finally {
    await model.engine.close();
  }
});
