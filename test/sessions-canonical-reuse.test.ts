// canonicalize with the session's previous request reuses the unchanged prefix; the result must be
// exactly the from-scratch one, whatever changed between the two requests.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatMessage } from '../src/chat/messages.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { canonicalize } from '../src/sessions/canonical.js';
import { INTERNAL_CONTEXT_MARKER } from '../src/sessions/openclaw.js';

const POOL: ChatMessage[] = [
  { role: 'system', content: 'You are a helpful agent.' },
  { role: 'user', content: '[Mon 2026-11-30 10:00 UTC] Read notes.txt' },
  {
    role: 'user',
    content: [
      { type: 'text', text: 'parts' },
      { type: 'text', text: 'of a message' },
    ],
  },
  { role: 'assistant', content: 'Done.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"notes.txt"}' } }],
  },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"other.txt"}' } }],
  },
  { role: 'tool', content: 'PINEAPPLE', tool_call_id: 'call_1' },
  { role: 'tool', content: 'PINEAPPLE', tool_call_id: 'call_2' },
  { role: 'user', content: `${INTERNAL_CONTEXT_MARKER}\ncontext` },
  { role: 'user', content: '[Mon 2026-11-30 10:01 UTC] Continue the current task from the existing transcript.' },
  { role: 'user', content: '[Mon 2026-11-30 10:01 UTC] <turn_aborted>' },
  { role: 'user', content: '[Mon 2026-11-30 10:02 UTC] [OpenClaw heartbeat poll] anything?' },
  { role: 'user', content: 'Thanks', name: 'alice' },
];

test('canonicalize reusing the previous request equals canonicalize from scratch, for appends, edits, removals and copies', () => {
  const rng = createRng(7);
  const pick = () => structuredClone(POOL[Math.floor(rng.next() * POOL.length)]!);
  let reusedSome = 0;
  for (let trial = 0; trial < 2000; trial++) {
    const previous = Array.from({ length: Math.floor(rng.next() * 12) }, pick);
    // The next request is a fresh parse: equal messages are different objects.
    const next = structuredClone(previous);
    const edit = Math.floor(rng.next() * 5);
    const at = Math.floor(rng.next() * (next.length + 1));
    if (edit === 0) next.push(...Array.from({ length: 1 + Math.floor(rng.next() * 3) }, pick));
    else if (edit === 1 && next.length > 0) next[Math.min(at, next.length - 1)] = pick();
    else if (edit === 2) next.splice(at, 1);
    else if (edit === 3) next.splice(at, next.length);
    const prior = { messages: previous, history: canonicalize(previous) };
    const reused = canonicalize(next, prior);
    assert.deepEqual(reused, canonicalize(next), `trial ${trial}: ${JSON.stringify({ previous, next })}`);
    if (reused.entries.length > 0 && prior.history.entries[0] === reused.entries[0]) reusedSome++;
  }
  assert.ok(reusedSome > 500, `the prefix was reused in ${reusedSome} trials`);
});

test('a message that differs only in its content parts, tool-call arguments or tool-call id is not reused', () => {
  const base: ChatMessage[] = [POOL[0]!, POOL[2]!, POOL[4]!, POOL[6]!];
  const prior = { messages: base, history: canonicalize(base) };
  const variants: ChatMessage[][] = [
    [
      base[0]!,
      {
        role: 'user',
        content: [
          { type: 'text', text: 'parts' },
          { type: 'text', text: 'of another message' },
        ],
      },
      base[2]!,
      base[3]!,
    ],
    [base[0]!, base[1]!, POOL[5]!, base[3]!],
    [base[0]!, base[1]!, base[2]!, POOL[7]!],
  ];
  for (const next of variants) assert.deepEqual(canonicalize(next, prior), canonicalize(next), JSON.stringify(next));
});
