// Fixtures for the learning-loop tests: turns, judgments and samples in a real SQLite store (a
// temp folder), and a test-double PolicyBackend for the trainer. Only what the tested code reads
// is filled in; everything else has fixed, valid values.

import type { JudgedTurn } from '../../src/judge/types.js';
import type { StepMetrics } from '../../src/engine/types.js';
import type { BatchSample } from '../../src/learn/ppo.js';
import type { PolicyBackend } from '../../src/learn/trainer.js';
import { setQueueStatus } from '../../src/store/queries.js';
import { openStore, type Store } from '../../src/store/store.js';
import type { SampleDraft, Turn } from '../../src/types.js';
import { freshDir } from './gateway.js';

let turnCount = 0;

/** A main turn of session `sessionId` with distinct token data per call (completion ids 1000+n, 2000+n, 3000+n). */
export function learnTurn(over: Partial<Turn> = {}): Turn {
  const n = ++turnCount;
  return {
    id: `turn_${n.toString(16).padStart(24, '0')}`,
    sessionId: 's1',
    sessionSource: 'x-session-id',
    kind: 'main',
    kindReason: 'default',
    compaction: null,
    traceId: null,
    model: 'policy',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: `question ${n}` },
    ],
    tools: null,
    sampling: {
      temperature: 1,
      topP: 1,
      topK: 0,
      maxTokens: 16,
      stop: [],
      seed: n,
      topLogprobs: 0,
      defaultsFrom: 'openai',
    },
    promptIds: [1, 151643, 2_000_000_000, n],
    completionIds: [1000 + n, 2000 + n, 3000 + n],
    logprobs: [-0.1 * n, -1e-300, -5e-324],
    sampledLogprobs: [-7, -8, -9],
    response: { role: 'assistant', content: `answer ${n}` },
    finishReason: 'stop_token',
    policyVersion: 0,
    receivedAt: 1000 + n,
    firstTokenAt: 1001 + n,
    completedAt: 1002 + n,
    toolCallErrors: [],
    retemplate: null,
    ...over,
  };
}

export function tempStore(now?: () => number): Store {
  return openStore({ dir: freshDir('learn-store-'), ...(now ? { now } : {}) });
}

export const sessionOf = (id: string, learning = true) => ({
  id,
  source: 'x-session-id' as const,
  seenAt: 1000,
  learning,
});

/** Records the turn and closes it with a next state: it is then `pending` in the learning queue. */
export function addClosedTurn(store: Store, turn: Turn): Turn {
  store.recordTurn(sessionOf(turn.sessionId ?? 's1'), turn);
  store.closeTurn({
    turnId: turn.id,
    reason: 'next_state',
    closedAt: turn.completedAt + 1,
    learning: true,
    nextState: {
      messages: [{ role: 'user', content: 'thanks' }],
      nextTurnId: `${turn.id}_next`,
      arrivedAt: turn.completedAt + 1,
    },
  });
  return turn;
}

/** Marks one closed turn claimed (as claimClosedTurns does, attempt counted) without touching the others. */
export function claim(store: Store, turnId: string): void {
  setQueueStatus(store.db, turnId, 'claimed', 0, true);
}

export function judgedFixture(turnId: string, over: Partial<JudgedTurn> = {}): JudgedTurn {
  return {
    turnId,
    nextTurnId: `${turnId}_next`,
    judge: 'double',
    skipped: null,
    evalVotes: [
      { score: 1, raw: 'looks right \\boxed{1}', failure: null, detail: null, attempts: 1, ms: 12.4 },
      { score: null, raw: '', failure: 'timeout', detail: 'no answer within 10 ms', attempts: 3, ms: 31 },
    ],
    hintVotes: [
      {
        score: 1,
        hint: 'Say the unit first.',
        raw: '\\boxed{1}\n[HINT_START]Say the unit first.[HINT_END]',
        failure: null,
        detail: null,
        attempts: 1,
        ms: 9,
      },
    ],
    score: 1,
    agreement: 1,
    hint: 'Say the unit first.',
    hintVote: 0,
    hintRejections: [{ vote: 1, reason: 'too_short' }],
    startedAt: 5000,
    finishedAt: 5100,
    ...over,
  };
}

export function rlDraft(turn: Turn, over: Partial<SampleDraft> = {}): SampleDraft {
  return {
    turnId: turn.id,
    source: 'rl',
    policyVersion: turn.policyVersion,
    score: 1,
    rlAdvantage: 1,
    opdWeight: 0,
    teacherLogprobs: null,
    teacherVersion: null,
    ...over,
  };
}

/** A closed, claimed, judged turn with a queued sample; returns the sample id. */
export function queueSample(
  store: Store,
  turn: Turn,
  over: Partial<SampleDraft> = {},
  judged: Partial<JudgedTurn> = {},
): number {
  addClosedTurn(store, turn);
  claim(store, turn.id);
  const id = store.learning.recordJudgment(judgedFixture(turn.id, judged), rlDraft(turn, over));
  if (id === null) throw new Error('no sample id');
  return id;
}

export function stepMetrics(step: number, over: Partial<StepMetrics> = {}): StepMetrics {
  return {
    step,
    samples: 2,
    tokens: 6,
    loss: 0.25 * step,
    gradNorm: 1.5,
    applied: true,
    lr: 1e-5,
    clipFraction: 0.1,
    approxKl: 0.01,
    entropy: 2.2,
    tisMean: 0.98,
    rolloutAbsDiff: 1e-3,
    seconds: 0.5,
    tokensPerSecond: 12,
    yieldedMs: 3,
    ...over,
  };
}

/**
 * TEST DOUBLE of the trainer's PolicyBackend: records every call in order, numbers optimizer steps
 * and versions like the learner does, and can be told to fail. `stepsPerBatch` steps per trainBatch.
 */
export class PolicyBackendDouble implements PolicyBackend {
  readonly batches: BatchSample[][] = [];
  readonly calls: string[] = [];
  version: number;
  step = 0;
  publishedCount = 0;
  failTrain: Error | null = null;
  failPublish: Error | null = null;
  /** Runs inside trainBatch/publish/checkpoint (to look at the store at that moment). */
  onCall: ((call: 'train' | 'publish' | 'checkpoint') => void) | null = null;
  /** When set, trainBatch waits for this promise before returning. */
  gate: Promise<void> | null = null;
  /** PolicyBackend.stopTraining, when a test gives one. */
  stopTraining?: () => Promise<void>;
  private waiters: { n: number; resolve(): void }[] = [];

  constructor(
    startVersion = 0,
    private readonly stepsPerBatch = 1,
  ) {
    this.version = startVersion;
  }

  async trainBatch(samples: BatchSample[]): Promise<StepMetrics[]> {
    this.calls.push('train');
    this.batches.push(samples);
    this.onCall?.('train');
    if (this.gate) await this.gate;
    if (this.failTrain) throw this.failTrain;
    return Array.from({ length: this.stepsPerBatch }, () => stepMetrics(++this.step, { samples: samples.length }));
  }

  async publish(): Promise<{ version: number; snapshotMs: number; swapMs: number }> {
    this.calls.push('publish');
    this.onCall?.('publish');
    if (this.failPublish) throw this.failPublish;
    this.version += 1;
    this.publishedCount += 1;
    this.waiters = this.waiters.filter((w) => {
      if (this.publishedCount < w.n) return true;
      w.resolve();
      return false;
    });
    return { version: this.version, snapshotMs: 1, swapMs: 2 };
  }

  async checkpoint(): Promise<void> {
    this.calls.push('checkpoint');
    this.onCall?.('checkpoint');
  }

  servingVersion(): number {
    return this.version;
  }

  /** Resolves once n publications have succeeded. */
  publishedAtLeast(n: number): Promise<void> {
    return this.publishedCount >= n ? Promise.resolve() : new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
}

/** A JudgeLog test double that keeps every event and resolves waiters by event name. */
export class LogRecorder {
  readonly events: { event: string; fields: Record<string, unknown> }[] = [];
  private waiters: { event: string; resolve(fields: Record<string, unknown>): void }[] = [];
  readonly log = (event: string, fields: Record<string, unknown>): void => {
    this.events.push({ event, fields });
    this.waiters = this.waiters.filter((w) => {
      if (w.event !== event) return true;
      w.resolve(fields);
      return false;
    });
  };

  next(event: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => this.waiters.push({ event, resolve }));
  }

  named(event: string): Record<string, unknown>[] {
    return this.events.filter((e) => e.event === event).map((e) => e.fields);
  }
}
