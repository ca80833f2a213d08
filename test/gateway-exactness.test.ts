// Token-exactness: the stored ids are the sampled ids (checked by re-running the engine in-process
// with the recorded seed and settings), the stored prompt ids are the rendered prompt, and
// re-rendering a turn through the chat template reproduces prompt ++ completion, or the mismatch
// is recorded with its position.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderRequest } from '../src/chat/prompt-codec.js';
import type { GenerationEvent } from '../src/engine/types.js';
import { engineBackend, post, scriptedBackend, startGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

test('stored completion ids and both log-probs are exactly what the engine sampled', async () => {
  // Without the prefix cache, so that the re-run computes its prompt in the same chunks as the
  // first run did: served from the first run's cached rows it would agree only to about 1e-6
  // (prefix-cache-exactness.test.ts), and this test compares bit for bit.
  const backend = await engineBackend(undefined, { kvCacheBytes: 0 });
  const gw = await startGateway(backend);
  try {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Name three colours.' },
    ];
    for (const [i, stream] of [
      [0, false],
      [1, true],
    ] as const) {
      const res = await post(
        `${gw.url}/v1/chat/completions`,
        { messages, max_tokens: 12, temperature: 0.9, top_p: 0.95, seed: 11 + i, stream },
        { 'x-turn-type': 'main', 'x-session-id': `exact-${i}` },
      );
      assert.equal(res.status, 200);
    }
    await gw.gateway.settled();
    for (const line of gw.store.exportLines()) {
      assert.deepEqual(
        line.prompt_ids,
        renderRequest(backend, { messages: messages as never, tools: undefined, enableThinking: undefined }).ids,
      );
      const again = {
        ids: [] as number[],
        logprobs: [] as number[],
        sampled: [] as number[],
        finish: undefined as GenerationEvent | undefined,
      };
      const s = line.sampling;
      for await (const e of backend.sampler.generate(line.prompt_ids, {
        temperature: s.temperature,
        topP: s.topP,
        topK: s.topK,
        maxTokens: s.maxTokens,
        stop: s.stop,
        seed: s.seed,
      })) {
        if (e.type === 'token') {
          again.ids.push(e.token.id);
          again.logprobs.push(e.token.logprob);
          again.sampled.push(e.token.sampledLogprob);
        } else again.finish = e;
      }
      assert.deepEqual(line.completion_ids, again.ids);
      assert.deepEqual(line.logprobs, again.logprobs);
      assert.deepEqual(line.sampled_logprobs, again.sampled);
      assert.equal(line.finish_reason, again.finish?.type === 'finish' && again.finish.reason);
      assert.equal(line.policy_version, 0);
      assert.ok(line.retemplate !== null, 'the re-template check ran');
      if (!line.retemplate!.match)
        assert.ok(
          line.retemplate!.firstMismatch! >= line.prompt_ids.length,
          'the prompt part always re-renders exactly',
        );
    }
  } finally {
    await gw.close();
    await backend.close();
  }
});

test('re-rendering reproduces well-formed answers exactly, and records where others differ', async () => {
  const { backend, sampler } = await scriptedBackend();
  const gw = await startGateway(backend);
  try {
    const tok = backend.tokenizer;
    const tools = [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }];
    const cases = [
      { name: 'plain content', ids: replyIds(tok, { content: 'The notes say hello.' }), match: true },
      {
        name: 'reasoning then content',
        ids: replyIds(tok, { reasoning: 'Short answer.', content: 'Hello.' }),
        match: true,
      },
      {
        name: "a tool call in the template's JSON layout",
        ids: replyIds(tok, { toolCalls: [{ function: { name: 'read', arguments: '{"path": "notes.txt"}' } }] }),
        match: true,
      },
      {
        name: 'compact tool-call JSON (re-serialised on render)',
        ids: replyIds(tok, { toolCalls: [{ function: { name: 'read', arguments: '{"path":"notes.txt"}' } }] }),
        match: false,
      },
      { name: 'trailing whitespace the parser trims', ids: replyIds(tok, { content: 'Hello.  ' }), match: false },
    ];
    for (const c of cases) {
      sampler.push(c.ids);
      const res = await post(
        `${gw.url}/v1/chat/completions`,
        { messages: [{ role: 'user', content: `case: ${c.name}` }], tools },
        { 'x-turn-type': 'main' },
      );
      assert.equal(res.status, 200, res.text);
    }
    await gw.gateway.settled();
    const lines = [...gw.store.exportLines()];
    cases.forEach((c, i) => {
      const l = lines[i]!;
      assert.deepEqual(l.completion_ids, c.ids, c.name);
      assert.equal(l.retemplate!.match, c.match, `${c.name}: ${JSON.stringify(l.retemplate)}`);
      if (!c.match)
        assert.ok(l.retemplate!.firstMismatch! > l.prompt_ids.length, `${c.name}: the difference is in the completion`);
    });
  } finally {
    await gw.close();
  }
});
