// The stateful side of sessions: which sessions are live, the last main turn of each (as hashes),
// and the closures that follow from each new request. State changes are synchronous, so a request's
// attribution and its state change happen without interleaving. Store writes go through a group
// commit (the writes one event causes share one SQLite transaction): commit() resolves once the turn is
// durable, and a closure is written while the engine works on the request that caused it. A closure
// the store refuses is kept and written again with the next write, so a full disk loses nothing
// that a later write can still save.
//
//   begin(request)  identify the session and the kind; attribute the live turn (queues its closure)
//   commit(turn)    record the answered turn (resolves when durable); a main turn becomes live
//   sweep(now)      close turns of sessions idle past the limit; release their memory

import { randomBytes } from 'node:crypto';
import type { ChatMessage } from '../chat/messages.js';
import type { ClosureReason, Rollout, SessionSource, Turn, TurnKind } from '../types.js';
import { attribute, responseHash, type Attribution, type LiveTurn } from './attribution.js';
import {
  canonicalize,
  extendChain,
  messageKey,
  type CanonicalHistory,
  type CanonicalizedRequest,
} from './canonical.js';
import { GroupCommit } from './group-commit.js';
import { classifyTurn } from './kind.js';
import { recordedNextState, type RecordedNextState } from './next-state.js';
import { fixedRollout, statedSession } from './request-session.js';
import type {
  IncomingRequest,
  RecorderConfig,
  RecorderEvent,
  TurnClosure,
  TurnPlan,
  TurnStore,
  TurnWrite,
} from './recorder-contract.js';

interface SessionState {
  id: string;
  source: SessionSource;
  live: LiveTurn | undefined;
  lastActive: number;
  /** Requests begun and not yet committed or abandoned; a session in flight is never released. */
  pending: number;
  learning: boolean;
  /** The rollout grouping, fixed by the first request that states one (null: none yet). */
  rollout: Rollout | null;
  /** What the session row in the store says, so it is written only when something changed. */
  row: { seenAt: number; learning: boolean; rollout: boolean } | null;
}

/** last_seen_at in the store is refreshed at most this often. */
const SEEN_RESOLUTION_MS = 60_000;
/** Last requests kept for canonicalize's reuse (each holds its messages: 100 kB for a long agent session). */
const MAX_REMEMBERED_REQUESTS = 64;
/** Closures the store refused, kept for the next write; beyond this the oldest are given up. */
const MAX_UNWRITTEN = 10_000;

export class TurnRecorder {
  /** Insertion order is recency order: touching a session moves it to the end. */
  private readonly sessions = new Map<string, SessionState>();
  private readonly byExtension = new Map<string, string>();
  private readonly byRetry = new Map<string, string>();
  private readonly writes: GroupCommit<TurnWrite>;
  private readonly unwritten: { close: TurnClosure; sessionId: string }[] = [];
  /** The last main request of recently active identified sessions (recency order), for canonicalize's reuse. */
  private readonly lastRequests = new Map<string, CanonicalizedRequest>();

  constructor(
    private readonly store: TurnStore,
    private readonly config: RecorderConfig,
    private readonly log: (e: RecorderEvent) => void = () => {},
  ) {
    this.writes = new GroupCommit((writes) => store.writeTurns(writes));
  }

  /** Resolves when every write queued so far has reached the store (or failed). */
  flushed(): Promise<void> {
    return this.writes.flushed();
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Rebuilds the live turns of the open main turns in the store (after a restart). */
  restore(now: number): number {
    let restored = 0;
    for (const turn of this.store.openMainTurns()) {
      if (turn.sessionId === null) continue;
      const state = this.session(turn.sessionId, turn.sessionSource, turn.completedAt);
      if (state.live) this.close(state, 'diverged', turn.completedAt, null);
      this.setLive(
        state,
        turn.id,
        canonicalize(turn.messages),
        turn.response,
        turn.traceId,
        turn.completedAt,
        turn.compaction,
      );
      restored++;
    }
    this.sweep(now);
    return restored;
  }

  begin(req: IncomingRequest): TurnPlan {
    const stated = statedSession(req);
    const key = stated?.sessionId;
    const history = canonicalize(req.messages, key === undefined ? undefined : this.lastRequests.get(key));
    const decision = classifyTurn(
      {
        ...(req.turnType ? { turnType: req.turnType } : {}),
        model: req.model,
        messages: req.messages,
        tools: req.tools,
        ...(req.identity ? { sessionKey: req.identity.rawKey } : {}),
      },
      this.config.kind,
    );
    const { sessionId, source } = stated ?? this.inferSession(history, decision.kind);
    let attribution: Attribution = { type: 'none' };
    let learning = !req.optOut;
    if (sessionId !== null) {
      const state = this.session(sessionId, source, req.receivedAt);
      if (req.rollout) state.rollout = fixedRollout(state.id, state.rollout, req.rollout);
      if (req.optOut) state.learning = false;
      learning = state.learning;
      if (decision.kind === 'main') {
        if (key !== undefined) this.rememberRequest(key, { messages: req.messages, history });
        attribution = attribute(state.live, history, req.messages, req.traceId, req.identity?.compaction ?? null);
        if (attribution.type !== 'none') {
          const nextState =
            attribution.type === 'next_state'
              ? recordedNextState(attribution.messages, req.turnId, req.receivedAt)
              : null;
          this.close(state, attribution.type, req.receivedAt, nextState);
        }
      }
      state.pending++; // only once nothing above threw: commit() or abandon() takes it back
    }
    return {
      turnId: req.turnId,
      sessionId,
      sessionSource: source,
      compaction: req.identity?.compaction ?? null,
      kind: decision.kind,
      kindReason: decision.reason,
      traceId: req.traceId,
      attribution,
      learning,
      history,
    };
  }

  /**
   * Records an answered (or cancelled) turn; resolves once it is durable, rejects when the store
   * fails (the caller answers 500, and the turn is not live). A completed main turn becomes the
   * session's live turn; a cancelled one is stored already closed.
   */
  commit(plan: TurnPlan, turn: Turn): Promise<void> {
    // A session deleted while this request was in flight comes back: new traffic is new data.
    const state =
      plan.sessionId === null
        ? undefined
        : (this.sessions.get(plan.sessionId) ?? this.session(plan.sessionId, plan.sessionSource, turn.completedAt));
    const cancelled = turn.finishReason === 'cancelled';
    const rowStale =
      state !== undefined &&
      (state.row === null ||
        state.row.learning !== plan.learning ||
        (state.rollout !== null && !state.row.rollout) ||
        turn.completedAt - state.row.seenAt > SEEN_RESOLUTION_MS);
    const upsert =
      state && rowStale
        ? {
            id: state.id,
            source: plan.sessionSource,
            seenAt: turn.completedAt,
            learning: plan.learning,
            rollout: state.rollout,
          }
        : null;
    let written = Promise.resolve();
    if (upsert || plan.learning) {
      this.retryUnwritten();
      const closure =
        cancelled && turn.kind === 'main' ? { reason: 'cancelled' as const, closedAt: turn.completedAt } : undefined;
      written = this.writes.submit({
        type: 'record',
        session: upsert,
        turn: plan.learning ? turn : null,
        ...(closure ? { closure } : {}),
      });
    }
    if (!state) return written;
    const row = upsert
      ? { seenAt: upsert.seenAt, learning: upsert.learning, rollout: upsert.rollout !== null }
      : state.row;
    state.row = row;
    state.pending = Math.max(0, state.pending - 1);
    state.lastActive = Math.max(state.lastActive, turn.completedAt);
    this.sessions.delete(state.id); // most recently active last
    this.sessions.set(state.id, state);
    if (turn.kind === 'main' && !cancelled) {
      // A concurrent request of the same session committed first: this later one is the branch kept.
      if (state.live) this.close(state, 'diverged', turn.completedAt, null);
      this.setLive(state, turn.id, plan.history, turn.response, turn.traceId, turn.completedAt, plan.compaction);
    }
    this.evictBeyondLimit(turn.completedAt);
    return written.catch((e: unknown) => {
      // Not stored, so not live, and the session row is written again next time.
      if (state.live?.turnId === turn.id) {
        this.unindex(state);
        state.live = undefined;
      }
      if (state.row === row) state.row = null;
      throw e;
    });
  }

  /**
   * Lets the store encode what the turn's commit will write of the request (messages, tools,
   * prompt ids) now, while the engine generates, instead of after the last token.
   */
  prepareInputs(plan: TurnPlan, messages: Turn['messages'], tools: Turn['tools'], promptIds: readonly number[]): void {
    if (plan.learning) this.store.prepareInputs?.(messages, tools, promptIds);
  }

  /** The request failed before producing a turn: only the in-flight count changes. */
  abandon(plan: TurnPlan): void {
    if (plan.sessionId === null) return;
    const state = this.sessions.get(plan.sessionId);
    if (state) state.pending = Math.max(0, state.pending - 1);
  }

  /** Closes live turns of sessions idle longer than the limit and releases their memory. */
  sweep(now: number): void {
    for (const state of [...this.sessions.values()]) {
      if (now - state.lastActive <= this.config.idleMs) break; // recency order: the rest are newer
      if (state.pending > 0) continue;
      this.release(state, now);
    }
  }

  /**
   * The store closed `turnId` as the end of its session's episode (an outcome arrived): it is not
   * live any more, and the session's next request starts with no turn to attribute to.
   */
  episodeEnded(sessionId: string, turnId: string): void {
    const state = this.sessions.get(sessionId);
    if (!state || state.live?.turnId !== turnId) return;
    this.unindex(state);
    state.live = undefined;
  }

  /** Drops a session from memory without closing anything (its rows are being deleted). */
  forget(sessionId: string): void {
    this.lastRequests.delete(sessionId);
    const state = this.sessions.get(sessionId);
    if (!state) return;
    this.unindex(state);
    this.sessions.delete(sessionId);
  }

  /** A request that states no session: the known session its history extends or retries, else a new one (main). */
  private inferSession(history: CanonicalHistory, kind: TurnKind): { sessionId: string | null; source: SessionSource } {
    for (let k = history.chain.length - 1; k > 0; k--) {
      const found = this.byExtension.get(history.chain[k]!);
      if (found) return { sessionId: found, source: 'inferred' };
    }
    const retried = this.byRetry.get(history.retryHash);
    if (retried) return { sessionId: retried, source: 'inferred' };
    if (kind === 'side') return { sessionId: null, source: 'none' };
    return { sessionId: `s_${randomBytes(8).toString('hex')}`, source: 'new' };
  }

  private session(id: string, source: SessionSource, now: number): SessionState {
    let state = this.sessions.get(id);
    if (state) {
      this.sessions.delete(id); // re-insert below: most recent last
      state.lastActive = Math.max(state.lastActive, now);
    } else {
      const stored = this.store.sessionLearning(id);
      const rollout = stored === undefined ? null : (this.store.sessionRollout?.(id) ?? null);
      state = {
        id,
        source,
        live: undefined,
        lastActive: now,
        pending: 0,
        learning: stored ?? true,
        rollout,
        row: stored === undefined ? null : { seenAt: 0, learning: stored, rollout: rollout !== null },
      };
    }
    this.sessions.set(id, state);
    return state;
  }

  private setLive(
    state: SessionState,
    turnId: string,
    history: CanonicalHistory,
    response: ChatMessage,
    traceId: string | null,
    completedAt: number,
    compaction: number | null,
  ): void {
    state.live = {
      turnId,
      promptLength: history.entries.length,
      extensionHash: extendChain(history.chain[history.chain.length - 1]!, response),
      retryHash: history.retryHash,
      traceId,
      completedAt,
      responseHash: responseHash(messageKey(response)),
      compaction,
    };
    state.lastActive = Math.max(state.lastActive, completedAt);
    this.byExtension.set(state.live.extensionHash, state.id);
    this.byRetry.set(state.live.retryHash, state.id);
  }

  private close(
    state: SessionState,
    reason: ClosureReason,
    closedAt: number,
    nextState: RecordedNextState | null,
  ): void {
    const live = state.live;
    if (!live) return;
    this.unindex(state);
    state.live = undefined;
    this.retryUnwritten();
    this.writeClosure({ turnId: live.turnId, reason, closedAt, nextState, learning: state.learning }, state.id);
  }

  private writeClosure(close: TurnClosure, sessionId: string): void {
    this.writes.submit({ type: 'close', close }).then(
      () =>
        this.log({
          event: 'turn_closed',
          turnId: close.turnId,
          sessionId,
          reason: close.reason,
          nextStateMessages: close.nextState?.messages.length ?? 0,
        }),
      (e: unknown) => {
        const kept = this.unwritten.length < MAX_UNWRITTEN;
        if (kept) this.unwritten.push({ close, sessionId });
        this.log({
          event: 'closure_unwritten',
          turnId: close.turnId,
          sessionId,
          reason: close.reason,
          message: (e as Error)?.message ?? String(e),
          kept,
        });
      },
    );
  }

  /** Queues the closures the store refused before, ahead of a new write. */
  private retryUnwritten(): void {
    if (this.unwritten.length === 0) return;
    for (const { close, sessionId } of this.unwritten.splice(0)) this.writeClosure(close, sessionId);
  }

  private unindex(state: SessionState): void {
    const live = state.live;
    if (!live) return;
    if (this.byExtension.get(live.extensionHash) === state.id) this.byExtension.delete(live.extensionHash);
    if (this.byRetry.get(live.retryHash) === state.id) this.byRetry.delete(live.retryHash);
  }

  private rememberRequest(sessionId: string, request: CanonicalizedRequest): void {
    this.lastRequests.delete(sessionId); // most recent last
    this.lastRequests.set(sessionId, request);
    if (this.lastRequests.size > MAX_REMEMBERED_REQUESTS)
      this.lastRequests.delete(this.lastRequests.keys().next().value!);
  }

  private release(state: SessionState, now: number): void {
    this.close(state, 'no_next_state', now, null);
    this.lastRequests.delete(state.id);
    this.sessions.delete(state.id);
    this.log({ event: 'session_released', sessionId: state.id, idleMs: now - state.lastActive });
  }

  private evictBeyondLimit(now: number): void {
    if (this.sessions.size <= this.config.maxSessions) return;
    for (const state of [...this.sessions.values()]) {
      if (this.sessions.size <= this.config.maxSessions) return;
      if (state.pending === 0) this.release(state, now);
    }
  }
}
