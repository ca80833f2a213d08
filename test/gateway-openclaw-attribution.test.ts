// Two attribution defects seen with real OpenClaw traffic, replayed over HTTP through the real
// gateway (answers come from the ScriptedSampler test double):
// - header-less sessions that open with the same message were merged, the second taken for a
//   retry of the first, because history matching ran before OpenClaw's Runtime line was read;
// - after a restart of this server OpenClaw resent the user's message in its retry wrapper, and
//   the wrapper became the next state the judge reads.
// Message texts are OpenClaw's, from shared/openclaw/captured/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { buildEvalPrompt } from '../src/judge/prompts.js';
import { freshDir, post, scriptedBackend, startGateway, type TestGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

const { backend, sampler } = await scriptedBackend();

const SYSTEM: ChatMessage = {
  role: 'system',
  content: '<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant running inside OpenClaw.',
};
const INTERNAL_CONTEXT: ChatMessage = {
  role: 'user',
  content: [
    {
      type: 'text',
      text:
        '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"Active exec sessions:\\nnone"\n' +
        '<<<END_OPENCLAW_INTERNAL_CONTEXT>>>',
    },
  ],
};
const QUEUED =
  '[Queued user message from a previous active turn; preserved as context only. ' +
  'Continue with the active prompt below.]';
const CONTINUE =
  'Continue the current task from the existing transcript, preserving completed work. ' +
  'If an action was interrupted, inspect its state before deciding whether to retry it. ' +
  'Do not restart the task or repeat completed actions.';

/** A session's first user message: the text, then the Runtime line that names the session. */
function opening(sessionId: string, text = 'Hello, this is turn one.'): ChatMessage {
  const runtime =
    `Runtime: agent=main | session=agent:main:explicit:${sessionId} | sessionId=${sessionId} | host=vm | ` +
    'repo=/home/user/.openclaw/workspace | os=Linux 6.18.44-fc-v669 (x64) | node=v24.22.3 | active_node=unknown | ' +
    'model=rl/main-model | default_model=rl/main-model | shell=bash';
  return { role: 'user', content: `[Sun 2026-11-29 23:14 UTC] ${text}\n\n${runtime}` };
}

const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistant = (content: string): ChatMessage => ({ role: 'assistant', content });

/** One main-line request as OpenClaw sends it (no session headers), answered with `reply`. */
async function send(
  gw: TestGateway,
  history: ChatMessage[],
  reply: string,
): Promise<{ sessionId: string | null; turnId: string }> {
  sampler.push(replyIds(backend.tokenizer, { content: reply }));
  const body = { model: 'main-model', messages: [SYSTEM, ...history, INTERNAL_CONTEXT] };
  const res = await post(`${gw.url}/v1/chat/completions`, body);
  assert.equal(res.status, 200, res.text);
  return { sessionId: res.headers.get('x-session-id'), turnId: res.headers.get('x-turn-id')! };
}

function closed(gw: TestGateway, turnId: string) {
  const c = gw.store.getTurn(turnId)?.closedTurn;
  assert.ok(c, `turn ${turnId} is closed`);
  return c;
}

test("two header-less sessions opening with the same message stay apart, each turn gets its own session's next message", async () => {
  const gw = await startGateway(backend, { mainModels: ['main-model'] });
  try {
    const hello = 'Hi! How can I help?'; // the same answer to both: only the Runtime line tells them apart
    const poem = user('[Sun 2026-11-29 23:15 UTC] Write me a poem about the sea.');
    const fruits = user('[Sun 2026-11-29 23:15 UTC] List three fruits.');
    const a1 = await send(gw, [opening('a')], hello);
    const b1 = await send(gw, [opening('b')], hello);
    assert.deepEqual([a1.sessionId, b1.sessionId], ['a', 'b']);
    const a2 = await send(gw, [opening('a'), assistant(hello), poem], 'Waves...');
    const b2 = await send(gw, [opening('b'), assistant(hello), fruits], 'Apple, pear, fig.');
    assert.deepEqual([a2.sessionId, b2.sessionId], ['a', 'b']);
    await gw.gateway.settled();

    const first = closed(gw, a1.turnId);
    assert.equal(first.closure, 'next_state', "not superseded: b's first request was no retry of it");
    assert.equal(first.nextState!.nextTurnId, a2.turnId);
    assert.deepEqual(first.nextState!.messages, [poem]);
    const second = closed(gw, b1.turnId);
    assert.equal(second.turn.sessionId, 'b');
    assert.equal(second.nextState!.nextTurnId, b2.turnId);
    assert.deepEqual(second.nextState!.messages, [fruits]);
    const sources = [a1, a2, b1, b2].map((t) => gw.store.getTurn(t.turnId)!.turn.sessionSource);
    assert.deepEqual(sources, ['runtime', 'runtime', 'runtime', 'runtime']);
  } finally {
    await gw.close();
  }
});

test('a request with no identity at all is still continued by its history', async () => {
  const gw = await startGateway(backend, { mainModels: ['main-model'] });
  try {
    const trip = user('[Sun 2026-11-29 23:14 UTC] plan a trip');
    const first = await send(gw, [trip], 'Where to?');
    const next = await send(gw, [trip, assistant('Where to?'), user('[Sun 2026-11-29 23:15 UTC] Lisbon')], 'ok');
    assert.match(first.sessionId!, /^s_[0-9a-f]{16}$/);
    assert.equal(next.sessionId, first.sessionId);
    await gw.gateway.settled();
    assert.equal(closed(gw, first.turnId).nextState!.nextTurnId, next.turnId);
  } finally {
    await gw.close();
  }
});

test("after a restart, a message OpenClaw resends in its retry wrapper is stored as the user's own words, raw kept", async () => {
  const dataDir = freshDir('restart-');
  const asking = [opening('r', 'Read notes.txt please')];
  const before = await startGateway(backend, { mainModels: ['main-model'] }, { dataDir });
  const asked = await send(before, asking, 'Which folder is it in?');
  await before.close(); // the server restarts; the answered turn is still waiting for what comes next

  const after = await startGateway(backend, { mainModels: ['main-model'] }, { dataDir });
  try {
    const own = user('[Sun 2026-11-29 23:20 UTC] It is in the workspace root.');
    const resent = user(`[Sun 2026-11-29 23:20 UTC] ${QUEUED}\nIt is in the workspace root.\n\n${CONTINUE}`);
    const next = await send(after, [...asking, assistant('Which folder is it in?'), resent], 'Reading it now.');
    assert.equal(next.sessionId, 'r');
    await after.gateway.settled();

    const c = closed(after, asked.turnId);
    assert.equal(c.closure, 'next_state');
    assert.deepEqual(c.nextState!.messages, [own]);
    const line = [...after.store.exportLines()].find((l) => l.turn_id === asked.turnId)!;
    assert.deepEqual(line.next_state!.messages, [own]);
    assert.deepEqual(line.next_state!.rawMessages, [resent], 'the message as received is kept');
    // What the judge reads: the user's reply, not OpenClaw's retry text.
    const prompt = String(buildEvalPrompt(c.turn, c.nextState!)[1]!.content);
    assert.ok(prompt.includes(`[USER]\n${own.content as string}`), prompt);
    assert.ok(!prompt.includes('Queued user message') && !prompt.includes('Continue the current task'), prompt);
  } finally {
    await after.close();
  }
});
