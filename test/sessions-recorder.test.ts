// The session recorder's state machine against an in-memory store: next states, idle closure and
// release, the memory bound, header-less inference, retries, concurrency, cancellation, opt-out,
// restore after a restart, and a failing store.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import type {
  IncomingRequest,
  SessionUpsert,
  TurnClosure,
  TurnPlan,
  TurnStore,
  TurnWrite,
} from '../src/sessions/recorder-contract.js';
import { TurnRecorder } from '../src/sessions/recorder.js';
import type { ClosureReason, Turn } from '../src/types.js';

class MemoryStore implements TurnStore {
  readonly sessions = new Map<string, SessionUpsert>();
  readonly turns = new Map<string, Turn>();
  readonly closures = new Map<string, TurnClosure>();
  failClose = false;
  failWrites = false;

  /** Transactions seen, each with its number of writes. */
  readonly transactions: number[] = [];

  sessionLearning(id: string) {
    return this.sessions.get(id)?.learning;
  }
  writeTurns(writes: readonly TurnWrite[]) {
    if (this.failWrites || (this.failClose && writes.some((w) => w.type === 'close'))) throw new Error('disk full'); // all or nothing
    this.transactions.push(writes.length);
    for (const w of writes) {
      if (w.type === 'record') this.recordTurn(w.session, w.turn, w.closure);
      else this.closeTurn(w.close);
    }
  }
  private recordTurn(
    session: SessionUpsert | null,
    turn: Turn | null,
    closure?: { reason: ClosureReason; closedAt: number },
  ) {
    if (session) {
      const old = this.sessions.get(session.id);
      this.sessions.set(session.id, { ...session, learning: (old?.learning ?? true) && session.learning });
    }
    if (turn) this.turns.set(turn.id, turn);
    if (turn && closure)
      this.closures.set(turn.id, {
        turnId: turn.id,
        reason: closure.reason,
        closedAt: closure.closedAt,
        nextState: null,
        learning: session?.learning ?? true,
      });
  }
  private closeTurn(c: TurnClosure) {
    if (this.turns.has(c.turnId)) this.closures.set(c.turnId, c);
  }
  openMainTurns() {
    return [...this.turns.values()].filter((t) => t.kind === 'main' && !this.closures.has(t.id));
  }
  reason(turnId: string) {
    return this.closures.get(turnId)?.reason;
  }
}

const IDLE = 60_000;
const sys: ChatMessage = { role: 'system', content: 'You are helpful.' };
const user = (text: string): ChatMessage => ({ role: 'user', content: text });
const reply = (text: string): ChatMessage => ({ role: 'assistant', content: text });

let nextId = 0;
function request(messages: ChatMessage[], extra: Partial<IncomingRequest> = {}): IncomingRequest {
  return {
    turnId: `turn_${++nextId}`,
    receivedAt: extra.receivedAt ?? 0,
    identity: undefined,
    turnType: 'main',
    optOut: false,
    traceId: null,
    model: 'm',
    messages,
    tools: undefined,
    ...extra,
  };
}
const withSession = (id: string) => ({
  identity: { sessionId: id, source: 'x-session-id' as const, compaction: null, rawKey: id },
});

function turnOf(
  plan: TurnPlan,
  req: IncomingRequest,
  response: ChatMessage,
  at: number,
  finish: Turn['finishReason'] = 'stop_token',
): Turn {
  return {
    id: plan.turnId,
    sessionId: plan.sessionId,
    sessionSource: plan.sessionSource,
    kind: plan.kind,
    kindReason: plan.kindReason,
    compaction: plan.compaction,
    traceId: plan.traceId,
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
    promptIds: [1, 2],
    completionIds: [3],
    logprobs: [-1],
    sampledLogprobs: [-1],
    response,
    finishReason: finish,
    policyVersion: 0,
    receivedAt: req.receivedAt,
    firstTokenAt: at,
    completedAt: at,
    toolCallErrors: [],
    retemplate: null,
  };
}

function setup(maxSessions = 100) {
  const store = new MemoryStore();
  const events: unknown[] = [];
  const recorder = new TurnRecorder(
    store,
    { kind: { sideModels: [], mainModels: [], defaultKind: 'main' }, idleMs: IDLE, maxSessions },
    (e) => events.push(e),
  );
  /** One request answered: begin, then commit; resolves once its writes are in the store. */
  const turn = async (
    messages: ChatMessage[],
    response: ChatMessage,
    at: number,
    extra: Partial<IncomingRequest> = {},
  ) => {
    const req = request(messages, { receivedAt: at, ...extra });
    const plan = recorder.begin(req);
    await recorder.commit(plan, turnOf(plan, req, response, at + 1));
    await recorder.flushed();
    return plan;
  };
  return { store, recorder, turn, events };
}

test('a reply closes the previous turn with it as next state; the new turn becomes live', async () => {
  const { store, turn } = setup();
  const a = await turn([sys, user('hi')], reply('hello'), 0, withSession('s'));
  const b = await turn([sys, user('hi'), reply('hello'), user('how are you?')], reply('fine'), 10, withSession('s'));
  assert.equal(b.attribution.type, 'next_state');
  const closed = store.closures.get(a.turnId)!;
  assert.equal(closed.reason, 'next_state');
  assert.deepEqual(closed.nextState, { messages: [user('how are you?')], nextTurnId: b.turnId, arrivedAt: 10 });
  assert.equal(store.reason(b.turnId), undefined, 'the new turn is open, waiting for its own next state');
});

test('idle sessions close their last turn and are released; sessions in flight are kept', async () => {
  const { store, recorder, turn, events } = setup();
  const a = await turn([user('one')], reply('1'), 0, withSession('a'));
  await turn([user('two')], reply('2'), 30_000, withSession('b'));
  recorder.sweep(IDLE); // a idle for 59 999 ms
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), undefined);
  recorder.sweep(IDLE + 2);
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), 'no_next_state');
  assert.equal(recorder.sessionCount, 1, 'a is released, b remains');
  assert.ok(events.some((e) => (e as { event: string }).event === 'session_released'));
  const inFlight = recorder.begin(request([user('three')], { ...withSession('c'), receivedAt: 0 }));
  recorder.sweep(10 * IDLE);
  assert.equal(recorder.sessionCount, 1, 'c has a request in flight');
  recorder.abandon(inFlight);
  recorder.sweep(10 * IDLE);
  assert.equal(recorder.sessionCount, 0);
});

test('memory is bounded: beyond maxSessions the least recently active session is closed and released', async () => {
  const { store, recorder, turn } = setup(2);
  const a = await turn([user('a')], reply('a'), 0, withSession('a'));
  await turn([user('b')], reply('b'), 1, withSession('b'));
  await turn([user('c')], reply('c'), 2, withSession('c'));
  assert.equal(recorder.sessionCount, 2);
  assert.equal(store.reason(a.turnId), 'no_next_state');
});

test('header-less requests: a new session, then continued by history, retried, or named by the Runtime line', async () => {
  const { store, turn } = setup();
  const first = await turn([sys, user('plan a trip')], reply('where to?'), 0);
  assert.equal(first.sessionSource, 'new');
  assert.match(first.sessionId!, /^s_[0-9a-f]{16}$/);
  const second = await turn([sys, user('plan a trip'), reply('where to?'), user('Lisbon')], reply('ok'), 5);
  assert.deepEqual(
    [second.sessionId, second.sessionSource, second.attribution.type],
    [first.sessionId, 'inferred', 'next_state'],
  );
  const retry = await turn([sys, user('plan a trip'), reply('where to?'), user('Lisbon')], reply('ok!'), 6);
  assert.deepEqual([retry.sessionId, retry.attribution.type], [first.sessionId, 'superseded']);
  assert.equal(store.reason(second.turnId), 'superseded');
  const other = await turn(
    [
      sys,
      user(
        '[Sun 2026-11-29 22:53 UTC] hi\n\nRuntime: agent=main | session=agent:main:explicit:loc-9 | sessionId=loc-9 | host=vm',
      ),
    ],
    reply('hey'),
    7,
  );
  assert.deepEqual([other.sessionId, other.sessionSource], ['loc-9', 'runtime']);
  const side = await turn([user('unrelated')], reply('x'), 8, { turnType: 'side' });
  assert.deepEqual([side.sessionId, side.sessionSource, side.kind], [null, 'none', 'side']);
});

test('side turns never close or replace the live main turn', async () => {
  const { store, turn } = setup();
  const main = await turn([user('q')], reply('a'), 0, withSession('s'));
  const side = await turn([user('summarise')], reply('s'), 1, { ...withSession('s'), turnType: 'side' });
  assert.equal(side.attribution.type, 'none');
  assert.equal(store.reason(main.turnId), undefined);
  const next = await turn([user('q'), reply('a'), user('more')], reply('b'), 2, withSession('s'));
  assert.equal(next.attribution.type, 'next_state');
});

test('concurrent requests of one session: the later commit is kept, the earlier one diverged', async () => {
  const { store, recorder } = setup();
  const ra = request([user('x')], withSession('s'));
  const rb = request([user('y')], withSession('s'));
  const pa = recorder.begin(ra);
  const pb = recorder.begin(rb);
  const committed = [
    recorder.commit(pa, turnOf(pa, ra, reply('a'), 5)),
    recorder.commit(pb, turnOf(pb, rb, reply('b'), 6)),
  ];
  await Promise.all(committed);
  await recorder.flushed();
  assert.deepEqual(store.transactions.slice(-1), [3], 'both turns and the closure in one transaction (group commit)');
  assert.equal(store.reason(pa.turnId), 'diverged');
  assert.equal(store.reason(pb.turnId), undefined);
});

test('a cancelled generation is stored closed and never becomes the live turn', async () => {
  const { store, recorder, turn } = setup();
  const a = await turn([user('q')], reply('a'), 0, withSession('s'));
  const req = request([user('q'), reply('a'), user('next')], { ...withSession('s'), receivedAt: 5 });
  const plan = recorder.begin(req);
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), 'next_state', 'attributed when the request arrived');
  await recorder.commit(plan, turnOf(plan, req, reply('par'), 6, 'cancelled'));
  assert.equal(store.reason(plan.turnId), 'cancelled');
  const retry = await turn([user('q'), reply('a'), user('next')], reply('full'), 7, withSession('s'));
  assert.equal(retry.attribution.type, 'none', 'nothing live to attribute to');
});

test('opt-out: nothing of the session is stored from then on, and it sticks', async () => {
  const { store, turn } = setup();
  const before = await turn([user('q')], reply('a'), 0, withSession('p'));
  const opted = await turn([user('q'), reply('a'), user('secret')], reply('b'), 1, {
    ...withSession('p'),
    optOut: true,
  });
  assert.equal(opted.learning, false);
  assert.equal(store.turns.has(opted.turnId), false);
  assert.equal(store.closures.get(before.turnId)!.learning, false, 'the earlier turn closes excluded from learning');
  assert.equal(store.sessions.get('p')!.learning, false);
  const later = await turn(
    [user('q'), reply('a'), user('secret'), reply('b'), user('more')],
    reply('c'),
    2,
    withSession('p'),
  );
  assert.equal(later.learning, false, 'sticky without the header');
  assert.equal(store.turns.has(later.turnId), false);
});

test('restore after a restart: open main turns are live again', async () => {
  const first = setup();
  const a = await first.turn([user('q')], reply('a'), 0, withSession('s'));
  const store = first.store;
  const recorder = new TurnRecorder(store, {
    kind: { sideModels: [], mainModels: [], defaultKind: 'main' },
    idleMs: IDLE,
    maxSessions: 10,
  });
  assert.equal(recorder.restore(10), 1);
  const req = request([user('q'), reply('a'), user('and then?')], { ...withSession('s'), receivedAt: 20 });
  const plan = recorder.begin(req);
  assert.equal(plan.attribution.type, 'next_state');
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), 'next_state');
  // Restored turns that have been idle too long close at once.
  const stale = new TurnRecorder(store, {
    kind: { sideModels: [], mainModels: [], defaultKind: 'main' },
    idleMs: IDLE,
    maxSessions: 10,
  });
  await recorder.commit(plan, turnOf(plan, req, reply('b'), 21));
  stale.restore(21 + IDLE + 1);
  await stale.flushed();
  assert.equal(store.reason(plan.turnId), 'no_next_state');
});

test('a closure the store refuses is kept and written with the next write; nothing stays in flight', async () => {
  const { store, recorder, turn, events } = setup();
  const a = await turn([user('q')], reply('a'), 0, withSession('s'));
  store.failClose = true;
  const req = request([user('q'), reply('a'), user('n')], { ...withSession('s'), receivedAt: 5 });
  const plan = recorder.begin(req);
  assert.equal(plan.attribution.type, 'next_state');
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), undefined, 'the store refused it');
  assert.ok(
    events.some(
      (e) => (e as { event: string; kept?: boolean }).event === 'closure_unwritten' && (e as { kept: boolean }).kept,
    ),
  );
  store.failClose = false;
  await recorder.commit(plan, turnOf(plan, req, reply('b'), 6));
  await recorder.flushed();
  assert.equal(store.reason(a.turnId), 'next_state', 'written with the next write');
  assert.deepEqual(store.closures.get(a.turnId)!.nextState?.messages, [user('n')]);
  assert.ok(store.turns.has(plan.turnId));
  recorder.sweep(10 * IDLE);
  await recorder.flushed();
  assert.equal(recorder.sessionCount, 0, 'no in-flight count was left behind');
});

test('a turn the store refuses is not acknowledged and does not become live', async () => {
  const { store, recorder, turn } = setup();
  const a = await turn([user('q')], reply('a'), 0, withSession('s'));
  store.failWrites = true;
  const req = request([user('q'), reply('a'), user('n')], { ...withSession('s'), receivedAt: 5 });
  const plan = recorder.begin(req);
  await assert.rejects(recorder.commit(plan, turnOf(plan, req, reply('b'), 6)), /disk full/);
  assert.equal(store.turns.has(plan.turnId), false);
  store.failWrites = false;
  const retry = await turn([user('q'), reply('a'), user('n')], reply('b'), 7, withSession('s'));
  assert.equal(retry.attribution.type, 'none', 'the failed turn was never live');
  assert.equal(store.reason(a.turnId), 'next_state', 'the refused closure landed with the retry');
});
