// Next states across an OpenClaw compaction. OpenClaw replaces older history with a summary and
// keeps the recent tail; its session key's `:n` goes up. When our answer survives as the last
// assistant message, the user's reply after it is still that turn's next state (observed with
// stock OpenClaw 2026.9.6: `openclaw sessions compact`, then the next turn). Otherwise: diverged.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { attribute, responseHash, type LiveTurn } from '../src/sessions/attribution.js';
import { canonicalize, extendChain, messageKey } from '../src/sessions/canonical.js';
import type { TurnClosure, TurnStore } from '../src/sessions/recorder-contract.js';
import { TurnRecorder } from '../src/sessions/recorder.js';
import type { Turn } from '../src/types.js';

const sys: ChatMessage = { role: 'system', content: '<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant.' };
const u1: ChatMessage = {
  role: 'user',
  content:
    '[Mon 2026-11-30 03:19 UTC] A different conversation starts here.\n\nRuntime: agent=main | session=agent:main:explicit:b | sessionId=b | host=vm',
};
const a1: ChatMessage = { role: 'assistant', content: 'First answer.' };
const u2: ChatMessage = { role: 'user', content: '[Mon 2026-11-30 03:20 UTC] Second message.' };
const a2: ChatMessage = { role: 'assistant', content: 'Second answer.' };
const u3: ChatMessage = { role: 'user', content: '[Mon 2026-11-30 03:21 UTC] After the compaction.' };
const summary: ChatMessage = {
  role: 'user',
  content: [
    {
      type: 'text',
      text: 'The conversation history before this point was compacted into the following summary:\n\n<summary>\nnotes\n</summary>',
    },
  ],
};

function live(prompt: ChatMessage[], response: ChatMessage, compaction: number | null): LiveTurn {
  const h = canonicalize(prompt);
  return {
    turnId: 'turn_2',
    promptLength: h.entries.length,
    extensionHash: extendChain(h.chain[h.chain.length - 1]!, response),
    retryHash: h.retryHash,
    traceId: 't',
    completedAt: 0,
    responseHash: responseHash(messageKey(response)),
    compaction,
  };
}

test('compaction: the reply after our kept answer is the next state', () => {
  const l = live([sys, u1, a1, u2], a2, 0);
  const next = [sys, summary, a2, u3];
  assert.deepEqual(attribute(l, canonicalize(next), next, 't2', 1), {
    type: 'next_state',
    turnId: 'turn_2',
    messages: [u3],
  });
});

test('compaction: diverged when our answer was summarized away, is not the last assistant message, or the count did not go up', () => {
  const l = live([sys, u1, a1, u2], a2, 0);
  const cases: [string, ChatMessage[], number | null][] = [
    ['answer not kept', [sys, summary, u3], 1],
    ['another assistant message after it', [sys, summary, a2, u3, a1, u3], 1],
    ['same count (an edit, not a compaction)', [sys, summary, a2, u3], 0],
    ['no count (no session key)', [sys, summary, a2, u3], null],
    ['nothing after the answer', [sys, summary, a2], 1],
  ];
  for (const [name, next, count] of cases) {
    assert.equal(attribute(l, canonicalize(next), next, 't2', count).type, 'diverged', name);
  }
});

test('compaction: the recorder closes the live turn with the next state, by session key count', async () => {
  const closures: TurnClosure[] = [];
  const store: TurnStore = {
    sessionLearning: () => undefined,
    writeTurns: (writes) => {
      for (const w of writes) if (w.type === 'close') closures.push(w.close);
    },
    openMainTurns: () => [],
  };
  const recorder = new TurnRecorder(store, {
    kind: { sideModels: [], mainModels: ['main-model'], defaultKind: 'side' },
    idleMs: 3_600_000,
    maxSessions: 100,
  });
  const request = (messages: ChatMessage[], compaction: number, turnId: string) => ({
    turnId,
    receivedAt: Date.now(),
    identity: { sessionId: 'b', source: 'affinity' as const, compaction, rawKey: `b:${compaction}` },
    turnType: undefined,
    optOut: false,
    traceId: null,
    model: 'main-model',
    messages,
    tools: undefined,
  });
  const answer = (
    plan: ReturnType<TurnRecorder['begin']>,
    req: ReturnType<typeof request>,
    response: ChatMessage,
  ): Turn => ({
    id: plan.turnId,
    sessionId: plan.sessionId,
    sessionSource: plan.sessionSource,
    kind: plan.kind,
    kindReason: plan.kindReason,
    compaction: plan.compaction,
    traceId: null,
    model: req.model,
    messages: req.messages,
    tools: null,
    sampling: {
      temperature: 1,
      topP: 1,
      topK: 0,
      maxTokens: 8,
      stop: [],
      seed: 1,
      topLogprobs: 0,
      defaultsFrom: 'openai',
    },
    promptIds: [1],
    completionIds: [2],
    logprobs: [-1],
    sampledLogprobs: [-1],
    response,
    finishReason: 'stop_token',
    policyVersion: 0,
    receivedAt: 0,
    firstTokenAt: 1,
    completedAt: 2,
    toolCallErrors: [],
    retemplate: null,
  });
  const r1 = request([sys, u1, a1, u2], 0, 'turn_2');
  const p1 = recorder.begin(r1);
  await recorder.commit(p1, answer(p1, r1, a2));
  const r2 = request([sys, summary, a2, u3], 1, 'turn_3');
  const p2 = recorder.begin(r2);
  assert.equal(p2.attribution.type, 'next_state');
  await recorder.flushed();
  assert.equal(closures.length, 1);
  assert.equal(closures[0]!.turnId, 'turn_2');
  assert.equal(closures[0]!.reason, 'next_state');
  assert.deepEqual(closures[0]!.nextState?.messages, [u3]);
});
