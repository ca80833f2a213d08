// Session functions, table-driven: identity, turn kind, OpenClaw text rules, canonical keys and
// next-state attribution. All pure: records in, records out.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { attribute, type LiveTurn } from '../src/sessions/attribution.js';
import { canonicalize, extendChain, messageKey } from '../src/sessions/canonical.js';
import { explicitIdentity, splitAffinityKey, traceIdOf } from '../src/sessions/identity.js';
import { classifyTurn, parseTurnType, type KindConfig } from '../src/sessions/kind.js';
import {
  openClawSideTask,
  runtimeSessionId,
  unwrapQueuedText,
  userMessageBody,
  withoutQueuedWrapper,
} from '../src/sessions/openclaw.js';

const sys: ChatMessage = { role: 'system', content: '<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant.' };
const ctx: ChatMessage = {
  role: 'user',
  content: [
    {
      type: 'text',
      text: '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nActive exec sessions: none\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>',
    },
  ],
};
const u1: ChatMessage = {
  role: 'user',
  content:
    '[Sun 2026-11-29 22:58 UTC] Read notes.txt please\n\nRuntime: agent=main | session=agent:main:explicit:s1 | sessionId=s1 | host=vm',
};
const call: ChatMessage = {
  role: 'assistant',
  content: null,
  tool_calls: [
    { id: 'call_ab12', type: 'function', function: { name: 'read', arguments: '{"path":"notes.txt"}' } },
    { id: 'call_cd34', type: 'function', function: { name: 'read', arguments: '{"path":"todo.txt"}' } },
  ],
};
/** How OpenClaw replays our tool-call message: ids without '_', arguments re-serialised. */
const callReplayed: ChatMessage = {
  role: 'assistant',
  content: null,
  tool_calls: [
    { id: 'callab12', type: 'function', function: { name: 'read', arguments: '{"path": "notes.txt"}' } },
    { id: 'callcd34', type: 'function', function: { name: 'read', arguments: '{"path": "todo.txt"}' } },
  ],
};
const r1: ChatMessage = { role: 'tool', content: 'the notes', tool_call_id: 'callab12' };
const r2: ChatMessage = { role: 'tool', content: 'the todos', tool_call_id: 'callcd34' };
const answer: ChatMessage = { role: 'assistant', content: 'Done: here are your notes.' };
const u2: ChatMessage = { role: 'user', content: '[Sun 2026-11-29 23:01 UTC] Thanks!' };
const queued: ChatMessage = {
  role: 'user',
  content:
    '[Sun 2026-11-29 22:59 UTC] [Queued user message from a previous active turn; preserved as context only. Continue with the active prompt below.]\nRead notes.txt please\n\nContinue the current task from the existing transcript, preserving completed work. If an action was interrupted, inspect its state before deciding whether to retry it. Do not restart the task or repeat completed actions.\n\nRuntime: agent=main | session=agent:main:explicit:s1 | sessionId=s1 | host=vm',
};
const aborted: ChatMessage = {
  role: 'user',
  content: '[Sun 2026-11-29 23:06 UTC] <turn_aborted>\nThe previous turn was interrupted.\n</turn_aborted>',
};
const cont: ChatMessage = {
  role: 'user',
  content:
    '[Sun 2026-11-29 23:06 UTC] Continue the current task from the existing transcript, preserving completed work.',
};
const heartbeat: ChatMessage = { role: 'user', content: '[Sun 2026-11-29 23:00 UTC] [OpenClaw heartbeat poll]' };
const heartbeatReply: ChatMessage = { role: 'assistant', content: 'All quiet.' };
const summary: ChatMessage = {
  role: 'user',
  content:
    'The conversation history before this point was compacted into the following summary:\n\n<summary>...</summary>',
};

/** The live turn a session has after answering `prompt` with `response`. */
function liveAfter(prompt: ChatMessage[], response: ChatMessage, traceId: string | null = 't1'): LiveTurn {
  const h = canonicalize(prompt);
  return {
    turnId: 'turn_1',
    promptLength: h.entries.length,
    extensionHash: extendChain(h.chain[h.chain.length - 1]!, response),
    retryHash: h.retryHash,
    traceId,
    completedAt: 0,
  };
}

test('attribution: what the next main request means for the live turn', () => {
  const cases: {
    name: string;
    prompt: ChatMessage[];
    response: ChatMessage;
    next: ChatMessage[];
    trace?: string;
    want: ReturnType<typeof attribute>;
  }[] = [
    {
      name: 'a user reply is the next state (transient context dropped)',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, u1, answer, u2, ctx],
      want: { type: 'next_state', turnId: 'turn_1', messages: [u2] },
    },
    {
      name: 'every tool result of parallel calls, with replayed ids and JSON',
      prompt: [sys, u1, ctx],
      response: call,
      next: [sys, u1, callReplayed, r1, r2, ctx],
      want: { type: 'next_state', turnId: 'turn_1', messages: [r1, r2] },
    },
    {
      name: 'a heartbeat pair in between is not the user speaking',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, u1, answer, heartbeat, heartbeatReply, u2, ctx],
      want: { type: 'next_state', turnId: 'turn_1', messages: [u2] },
    },
    {
      name: 'a retry with the queued-message wrapper supersedes',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, queued, ctx],
      trace: 't1',
      want: { type: 'superseded', turnId: 'turn_1', sameTrace: true },
    },
    {
      name: 'a retry after a timeout (turn_aborted + continue) supersedes',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, u1, aborted, cont, ctx],
      trace: 't2',
      want: { type: 'superseded', turnId: 'turn_1', sameTrace: false },
    },
    {
      name: 'the original text replayed after a wrapped retry still extends it',
      prompt: [sys, queued, ctx],
      response: answer,
      next: [sys, u1, answer, u2, ctx],
      want: { type: 'next_state', turnId: 'turn_1', messages: [u2] },
    },
    {
      name: 'compaction rewrites history: diverged',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, summary, u2, ctx],
      want: { type: 'diverged', turnId: 'turn_1', why: 'not_an_extension' },
    },
    {
      name: 'an edited answer: diverged',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, u1, { role: 'assistant', content: 'edited' }, u2],
      want: { type: 'diverged', turnId: 'turn_1', why: 'not_an_extension' },
    },
    {
      name: 'the same history plus our answer and nothing new',
      prompt: [sys, u1, ctx],
      response: answer,
      next: [sys, u1, answer, ctx],
      want: { type: 'diverged', turnId: 'turn_1', why: 'nothing_new' },
    },
  ];
  for (const c of cases) {
    const got = attribute(liveAfter(c.prompt, c.response), canonicalize(c.next), c.next, c.trace ?? null);
    assert.deepEqual(got, c.want, c.name);
  }
  assert.deepEqual(attribute(undefined, canonicalize([u1]), [u1], null), { type: 'none' });
});

test('canonical keys: equal across OpenClaw rewrites, different for different content', () => {
  const same: [ChatMessage, ChatMessage][] = [
    [u1, queued],
    [u1, { role: 'user', content: [{ type: 'text', text: '[Mon 2026-11-30 09:00 UTC] Read notes.txt please' }] }],
    [call, callReplayed],
    [
      { role: 'tool', content: 'x', tool_call_id: 'call_1' },
      { role: 'tool', content: 'x', tool_call_id: 'call1' },
    ],
    [
      { role: 'assistant', content: 'hi ' },
      { role: 'assistant', content: 'hi', reasoning_content: 'thinking' },
    ],
    [
      { role: 'developer', content: 'rules' },
      { role: 'system', content: 'rules' },
    ],
  ];
  for (const [a, b] of same) assert.equal(messageKey(a), messageKey(b), JSON.stringify([a, b]));
  const different: [ChatMessage, ChatMessage][] = [
    [u1, u2],
    [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'a' },
    ],
    [
      { role: 'tool', content: 'x', tool_call_id: 'a' },
      { role: 'tool', content: 'x', tool_call_id: 'b' },
    ],
    [call, { ...call, tool_calls: call.tool_calls!.slice(0, 1) }],
  ];
  for (const [a, b] of different) assert.notEqual(messageKey(a), messageKey(b), JSON.stringify([a, b]));
  const h = canonicalize([sys, u1, cont, aborted, ctx]);
  assert.deepEqual(
    h.entries.map((e) => e.index),
    [0, 1, 3],
    'internal context and the continuation prompt are transient',
  );
  assert.equal(h.retryHash, canonicalize([sys, u1]).retryHash, 'turn_aborted does not change the retry hash');
});

test('OpenClaw text rules', () => {
  const bodies: [string, string][] = [
    ['[Sun 2026-11-29 22:58 UTC] Hello\n\nRuntime: agent=main | sessionId=x', 'Hello'],
    [queued.content as string, 'Read notes.txt please'],
    ['plain text', 'plain text'],
    ['[not a timestamp] text', '[not a timestamp] text'],
  ];
  for (const [text, want] of bodies) assert.equal(userMessageBody(text), want);
  assert.equal(runtimeSessionId([sys, u1]), 's1');
  assert.equal(runtimeSessionId([sys, { role: 'user', content: 'sessionId=nope in the text' }]), undefined);
  const sideTasks: [ChatMessage[], string[] | undefined, string | undefined, string | undefined][] = [
    [
      [
        { role: 'system', content: 'You are a context summarization assistant. ...' },
        { role: 'user', content: '<conversation>' },
      ],
      undefined,
      'cmp-2',
      'compaction',
    ],
    [
      [
        { role: 'system', content: 'Write an Activity recap for someone...' },
        { role: 'user', content: '{}' },
      ],
      undefined,
      undefined,
      'activity_recap',
    ],
    [[{ role: 'system', content: 'You are keeping a dream diary. ...' }], undefined, undefined, 'dreaming'],
    [
      [sys, { role: 'user', content: 'Follow the heartbeat monitor scratch context when provided. ...' }, ctx],
      ['read'],
      undefined,
      'heartbeat',
    ],
    [
      [
        sys,
        u1,
        answer,
        { role: 'user', content: 'Pre-compaction memory flush. Store durable memories only in memory/...' },
      ],
      ['read', 'write'],
      undefined,
      'memory_flush',
    ],
    [[sys, u1], ['write', 'read'], undefined, 'memory_flush'],
    [
      [sys, { role: 'user', content: '[cron:c0b5 skill-collection-review-main] Review ...' }, ctx],
      ['read', 'exec'],
      undefined,
      'cron',
    ],
    [[sys, u1, ctx], ['read'], 'openclaw-cron-6e53', 'cron'],
    [[sys, u1, ctx], ['read', 'exec'], 's1:0', undefined],
  ];
  for (const [messages, tools, key, want] of sideTasks) {
    const specs = tools?.map((name) => ({ type: 'function' as const, function: { name } }));
    assert.equal(
      openClawSideTask(messages, specs, key),
      want,
      JSON.stringify(messages[messages.length - 1]).slice(0, 60),
    );
  }
});

test('the Runtime line: read from the first user message only, as a trailer or its own part, on its own line', () => {
  const line = (id: string) => `Runtime: agent=main | session=agent:main:explicit:${id} | sessionId=${id} | host=vm`;
  assert.equal(runtimeSessionId([sys, u1, answer, u2]), 's1');
  assert.equal(runtimeSessionId([u1]), 's1', 'no system prompt');
  // After a compaction OpenClaw moves the line onto the summary message, as a content part of its own.
  const parts = [
    { type: 'text' as const, text: '<summary>...</summary>' },
    { type: 'text' as const, text: line('cmp-2') },
  ];
  const compacted: ChatMessage = { role: 'user', content: parts };
  assert.equal(runtimeSessionId([sys, compacted, answer]), 'cmp-2');
  assert.equal(runtimeSessionId([sys, queued]), 's1', 'a retry-wrapped first message keeps the trailer');
  // A line pasted into a later message, or a sessionId on a line after it, names no session.
  assert.equal(runtimeSessionId([sys, u2, answer, { role: 'user', content: `look:\n${line('pasted')}` }]), undefined);
  const split = 'hi\nRuntime: agent=main | host=vm\nmore | sessionId=later';
  assert.equal(runtimeSessionId([sys, { role: 'user', content: split }]), undefined);
  const inSystem: ChatMessage = { role: 'system', content: line('in-system') };
  assert.equal(runtimeSessionId([inSystem, u2]), undefined, 'OpenClaw never puts it in the system prompt');
});

test("OpenClaw's retry wrapper: the user's own message comes back, as the transcript keeps it", () => {
  const CONTINUE =
    'Continue the current task from the existing transcript, preserving completed work. ' +
    'If an action was interrupted, inspect its state before deciding whether to retry it. ' +
    'Do not restart the task or repeat completed actions.';
  const QUEUED =
    '[Queued user message from a previous active turn; preserved as context only. ' +
    'Continue with the active prompt below.]';
  const ts = '[Sun 2026-11-29 23:20 UTC] ';
  const cases: [string, string | undefined][] = [
    [`${ts}${QUEUED}\nSummarise notes.txt, please.\n\n${CONTINUE}`, `${ts}Summarise notes.txt, please.`],
    // The first message of a session: its Runtime trailer follows the wrapper's paragraph and stays.
    [
      queued.content as string,
      '[Sun 2026-11-29 22:59 UTC] Read notes.txt please\n\n' +
        'Runtime: agent=main | session=agent:main:explicit:s1 | sessionId=s1 | host=vm',
    ],
    // Words of the wrapper the user wrote themselves are the user's.
    [`${QUEUED}\nfirst\n\n${CONTINUE}\n\nsecond\n\n${CONTINUE}`, `first\n\n${CONTINUE}\n\nsecond`],
    [
      `${ts}${QUEUED}\n[Sun 2026-11-29 23:19 UTC] kept timestamp\n\n${CONTINUE}`,
      '[Sun 2026-11-29 23:19 UTC] kept timestamp',
    ],
    [u2.content as string, undefined],
    [`${ts}quoting ${QUEUED}`, undefined],
  ];
  for (const [text, want] of cases) assert.equal(unwrapQueuedText(text), want, text.slice(0, 60));
  for (const [text] of cases) {
    assert.equal(
      userMessageBody(unwrapQueuedText(text) ?? text),
      userMessageBody(text),
      'unwrapping keeps the canonical body',
    );
  }
  const [wrapped, own] = cases[0]!;
  const inParts: ChatMessage = { role: 'user', content: [{ type: 'text', text: wrapped }] };
  assert.deepEqual(withoutQueuedWrapper(inParts), { role: 'user', content: [{ type: 'text', text: own }] });
  assert.equal(withoutQueuedWrapper(u2), u2, 'an unwrapped message is returned as it is');
  const assistant: ChatMessage = { role: 'assistant', content: wrapped };
  assert.equal(withoutQueuedWrapper(assistant), assistant, 'only user messages are unwrapped');
});

test('session identity: first match wins, OpenClaw suffix stripped, bad ids refused', () => {
  const cases: [Parameters<typeof explicitIdentity>[0], ReturnType<typeof explicitIdentity>][] = [
    [
      { xSessionId: 'a', affinity: 'b:1', user: 'u' },
      { ok: true, identity: { sessionId: 'a', source: 'x-session-id', compaction: null, rawKey: 'a' } },
    ],
    [
      { bodySessionId: 'a2', promptCacheKey: 'b:1' },
      { ok: true, identity: { sessionId: 'a2', source: 'x-session-id', compaction: null, rawKey: 'a2' } },
    ],
    [
      { affinity: 'e2e-a:3', sessionIdHeader: 'other:0', promptCacheKey: 'e2e-a:3' },
      { ok: true, identity: { sessionId: 'e2e-a', source: 'affinity', compaction: 3, rawKey: 'e2e-a:3' } },
    ],
    [
      { sessionIdHeader: 'cmp-2' },
      { ok: true, identity: { sessionId: 'cmp-2', source: 'affinity', compaction: null, rawKey: 'cmp-2' } },
    ],
    [
      { promptCacheKey: 'k:12' },
      { ok: true, identity: { sessionId: 'k', source: 'prompt_cache_key', compaction: 12, rawKey: 'k:12' } },
    ],
    [
      { user: 'thread-1' },
      { ok: true, identity: { sessionId: 'user:thread-1', source: 'user', compaction: null, rawKey: 'thread-1' } },
    ],
    [{}, { ok: true, identity: undefined }],
    [
      { user: '名前' },
      { ok: true, identity: { sessionId: 'user:名前', source: 'user', compaction: null, rawKey: '名前' } },
    ],
    [
      { xSessionId: '' },
      {
        ok: false,
        field: 'X-Session-Id header',
        message:
          'X-Session-Id header must be 1-256 printable characters (Unicode text, no control characters or lone surrogates)',
      },
    ],
    [
      { affinity: 'a\u0001b' },
      {
        ok: false,
        field: 'x-session-affinity header',
        message:
          'x-session-affinity header must be 1-256 printable characters (Unicode text, no control characters or lone surrogates)',
      },
    ],
  ];
  for (const [input, want] of cases) assert.deepEqual(explicitIdentity(input), want, JSON.stringify(input));
  assert.deepEqual(splitAffinityKey('a:b:7'), { id: 'a:b', compaction: 7 });
  assert.deepEqual(splitAffinityKey('urn:x'), { id: 'urn:x', compaction: null });
  assert.equal(
    traceIdOf('00-6e5f56c6dfb47a9a6641fe7381acc5db-c98c17bd65383d2c-01'),
    '6e5f56c6dfb47a9a6641fe7381acc5db',
  );
  for (const bad of [undefined, '', 'garbage', '00-00000000000000000000000000000000-c98c17bd65383d2c-01'])
    assert.equal(traceIdOf(bad), null);
});

test('turn kind: header, model routing, OpenClaw signatures, default', () => {
  const config: KindConfig = { sideModels: ['side-model'], mainModels: ['main-model'], defaultKind: 'side' };
  const tools = [{ type: 'function' as const, function: { name: 'exec' } }];
  const recap: ChatMessage[] = [
    { role: 'system', content: 'Write an Activity recap ...' },
    { role: 'user', content: '{}' },
  ];
  const cases: [Parameters<typeof classifyTurn>[0], KindConfig, string][] = [
    [{ turnType: 'main', model: 'side-model', messages: recap, tools: undefined }, config, 'main header'],
    [{ turnType: 'side', model: 'main-model', messages: [sys, u1], tools }, config, 'side header'],
    [{ model: 'side-model', messages: [sys, u1], tools }, config, 'side model:side'],
    [{ model: 'main-model', messages: recap, tools: undefined }, config, 'main model:main'],
    [{ model: 'stub', messages: recap, tools: undefined }, config, 'side openclaw:activity_recap'],
    [{ model: 'stub', messages: [sys, u1, ctx], tools }, config, 'main openclaw:agent_turn'],
    [{ model: 'stub', messages: [u1], tools: undefined }, config, 'side default'],
    [{ model: 'stub', messages: [u1], tools: undefined }, { ...config, defaultKind: 'main' }, 'main default'],
  ];
  for (const [input, cfg, want] of cases) {
    const d = classifyTurn(input, cfg);
    assert.equal(`${d.kind} ${d.reason}`, want);
  }
  assert.deepEqual(['main', ' Side ', 'x', undefined].map(parseTurnType), ['main', 'side', null, undefined]);
});
