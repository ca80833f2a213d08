// The recorder's contracts: what it needs from the store (TurnStore and the writes it sends), what
// the gateway hands it (IncomingRequest) and gets back (TurnPlan), and the events it reports.

import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import type { ClosureReason, Rollout, SessionSource, Turn, TurnKind } from '../types.js';
import type { Attribution } from './attribution.js';
import type { CanonicalHistory } from './canonical.js';
import type { ExplicitIdentity } from './identity.js';
import type { KindConfig } from './kind.js';
import type { RecordedNextState } from './next-state.js';

/** One write of the recorder: an answered turn (with its session row), or a closure. */
export type TurnWrite =
  | {
      type: 'record';
      session: SessionUpsert | null;
      turn: Turn | null;
      closure?: { reason: ClosureReason; closedAt: number };
    }
  | { type: 'close'; close: TurnClosure };

/** What the recorder needs from the store (store/store.ts implements it). */
export interface TurnStore {
  /** Whether the session may be learned from; undefined for an unknown session. */
  sessionLearning(sessionId: string): boolean | undefined;
  /** The rollout grouping the session was given (null: none); optional for stores without it. */
  sessionRollout?(sessionId: string): Rollout | null;
  /**
   * All the writes in one transaction, in order: a record inserts or updates the session row and,
   * when given, inserts the turn; a close sets an open main turn's reason, next state and
   * learning-queue entry. All land or none (then it throws).
   */
  writeTurns(writes: readonly TurnWrite[]): void;
  /** Optional: encode a request's big columns ahead of the turn's commit (same arrays by identity). */
  prepareInputs?(messages: Turn['messages'], tools: Turn['tools'], promptIds: readonly number[]): void;
  /** Open main turns (no closure yet), oldest first, for restoring state after a restart. */
  openMainTurns(): Turn[];
}

export interface SessionUpsert {
  id: string;
  source: SessionSource;
  seenAt: number;
  /** False once the session opted out (sticky). */
  learning: boolean;
  /** Set once, by the session's first request that carries rollout headers; the store keeps the first. */
  rollout?: Rollout | null;
}

export interface TurnClosure {
  turnId: string;
  reason: ClosureReason;
  closedAt: number;
  nextState: RecordedNextState | null;
  /** Queue status: pending for the learner, or excluded (opted out). */
  learning: boolean;
}

export interface RecorderConfig {
  kind: KindConfig;
  /** A session idle longer than this closes its live turn with `no_next_state`. */
  idleMs: number;
  /** Sessions kept in memory; the least recently active beyond this are closed and released. */
  maxSessions: number;
}

/** A request as the recorder sees it (the gateway has validated and extracted everything). */
export interface IncomingRequest {
  turnId: string;
  receivedAt: number;
  identity: ExplicitIdentity | undefined;
  turnType: TurnKind | undefined;
  optOut: boolean;
  traceId: string | null;
  model: string;
  messages: ChatMessage[];
  tools: ToolSpec[] | undefined;
  /** The rollout headers, when the request carries any. */
  rollout?: Rollout;
}

/** A request's rollout headers disagree with what its session was given first (the gateway answers 400). */
export class RolloutConflictError extends Error {
  constructor(
    readonly field: 'X-Task-Id' | 'X-Rollout-Index' | 'X-Rollout-Count',
    message: string,
  ) {
    super(message);
    this.name = 'RolloutConflictError';
  }
}

/** What begin() decided; pass it back to commit() or abandon(). */
export interface TurnPlan {
  turnId: string;
  sessionId: string | null;
  sessionSource: SessionSource;
  compaction: number | null;
  kind: TurnKind;
  kindReason: string;
  traceId: string | null;
  attribution: Attribution;
  /** False when the session opted out of learning: nothing of it is stored. */
  learning: boolean;
  history: CanonicalHistory;
}

export type RecorderEvent =
  | { event: 'turn_closed'; turnId: string; sessionId: string; reason: ClosureReason; nextStateMessages: number }
  | { event: 'session_released'; sessionId: string; idleMs: number }
  | {
      event: 'closure_unwritten';
      turnId: string;
      sessionId: string;
      reason: ClosureReason;
      message: string;
      kept: boolean;
    };
