// The records that cross folder boundaries: the gateway and sessions produce them, the store keeps
// them, the learning loop (next issue) consumes ClosedTurns. Types only; every field documented.
// Rows in the store are a different shape (store/tables.ts) and are converted in store/records.ts.

import type { ChatMessage, ToolSpec } from './chat/messages.js';
import type { FinishReason } from './engine/types.js';

/** A main-line turn is trained on; a side turn (heartbeat, recap, summarizer, ...) is answered and logged only. */
export type TurnKind = 'main' | 'side';

/**
 * How the session of a request was found, first match wins (sessions/identity.ts):
 * - `x-session-id`: the original's patched client (`X-Session-Id` header or body `session_id`);
 * - `affinity`: OpenClaw's `x-session-affinity` / `session_id` headers (`<id>:<n>`, `:n` stripped);
 * - `prompt_cache_key`: OpenClaw's body `prompt_cache_key` (same format);
 * - `user`: the body `user` field (namespaced as `user:<value>`);
 * - `runtime`: header-less: the `sessionId=` of OpenClaw's `Runtime:` line in the first user message;
 * - `inferred`: no identity stated: the request's history extends (or retries) a known session's last turn;
 * - `new`: a header-less main request that matches nothing starts a session;
 * - `none`: a side request with no identity belongs to no session.
 */
export type SessionSource =
  | 'x-session-id'
  | 'affinity'
  | 'prompt_cache_key'
  | 'user'
  | 'inferred'
  | 'runtime'
  | 'new'
  | 'none';

/**
 * Why a main turn stopped waiting for its next state:
 * - `next_state`: the session's next main request extended it; its new messages are the next state;
 * - `diverged`: the next main request does not extend it (compaction, an edit, a concurrent branch);
 * - `superseded`: a retry of the same request replaced it, so the client never kept this answer;
 * - `no_next_state`: the session stayed idle past the configured time (or was evicted from memory);
 * - `cancelled`: the client went away before the end; the generation was stopped;
 * - `episode_end`: the client sent the session's outcome (POST /v1/feedback); no next state.
 */
export type ClosureReason = 'next_state' | 'diverged' | 'superseded' | 'no_next_state' | 'cancelled' | 'episode_end';

export const CLOSURE_REASONS: readonly ClosureReason[] = [
  'next_state',
  'diverged',
  'superseded',
  'no_next_state',
  'cancelled',
  'episode_end',
];

/**
 * The rollout grouping a client states on its requests (X-Task-Id, X-Rollout-Index,
 * X-Rollout-Count; null where not given): the session is rollout `index` of `count` rollouts of task
 * `taskId`. The learner's `steps` method groups rollouts by task. Fixed by the session's first
 * request that carries any of them.
 */
export interface Rollout {
  taskId: string | null;
  index: number | null;
  count: number | null;
}

/** One rollout (a session) of a task as the `steps` method's release decision sees it (learn/steps.ts). */
export interface RolloutState {
  sessionId: string;
  /** X-Task-Id; null: the session is its own task. */
  taskId: string | null;
  /** X-Rollout-Count (the group size G); null when the client did not say. */
  count: number | null;
  /** Its outcome arrived. */
  hasOutcome: boolean;
  /** Main turns still open or waiting for the judge. */
  unsettledTurns: number;
  /** Judged steps whose sample waits for the group. */
  waitingSamples: number;
}

/** The sampling settings actually used (request values, else the model's generation_config, else OpenAI's). */
export interface SamplingUsed {
  temperature: number;
  topP: number;
  /** 0 = off. */
  topK: number;
  /** The effective cap: min(requested or the rest of the context, the rest of the context). */
  maxTokens: number;
  stop: string[];
  /** Always set: drawn by the gateway when the request had none, so every sample can be replayed. */
  seed: number;
  /** Alternatives per token returned to the client (0 when logprobs were not asked for). */
  topLogprobs: number;
  /** Where temperature/top_p/top_k came from when the request omitted them. */
  defaultsFrom: 'request' | 'generation_config' | 'openai';
}

/** Result of re-rendering (prompt messages + response) through the chat template and tokenizing it. */
export interface RetemplateCheck {
  /** The rendered ids start with promptIds followed by completionIds. */
  match: boolean;
  /** First index (into promptIds ++ completionIds) where the rendering differs; absent on a match. */
  firstMismatch?: number;
  /** Rendered length vs recorded length, for diagnosis. */
  renderedTokens: number;
  recordedTokens: number;
}

/** One answered request, exactly as the policy saw and produced it. */
export interface Turn {
  /** `turn_` + 24 hex digits (12 of the arrival time, 12 random), assigned when the request arrives. */
  id: string;
  /** Null only for side requests that carried no identity. */
  sessionId: string | null;
  sessionSource: SessionSource;
  kind: TurnKind;
  /** Why this kind: `header`, `model:side`, `openclaw:heartbeat`, `default`, ... (sessions/kind.ts). */
  kindReason: string;
  /** OpenClaw's compaction count, the `:n` of `<sessionId>:<n>`; null when not sent. */
  compaction: number | null;
  /** W3C traceparent trace-id (OpenClaw: one per agent run, shared by its retries). */
  traceId: string | null;
  /** The model id the client asked for. */
  model: string;
  /** The request's messages as received (the prompt the policy saw). */
  messages: ChatMessage[];
  tools: ToolSpec[] | null;
  sampling: SamplingUsed;
  /** Exact prompt token ids sent to the sampler. */
  promptIds: number[];
  /** Exact sampled ids, including a final stop token when one ended the generation. */
  completionIds: number[];
  /** log p(id) at temperature 1, per completion token (what the trainer needs). */
  logprobs: number[];
  /** log q(id) under the distribution actually sampled from, per completion token. */
  sampledLogprobs: number[];
  /** The assistant message returned to the client. */
  response: ChatMessage;
  finishReason: FinishReason;
  /** Policy version that sampled every token of this turn. */
  policyVersion: number;
  /** Epoch milliseconds. */
  receivedAt: number;
  firstTokenAt: number | null;
  completedAt: number;
  /** Malformed tool-call markup the model produced (returned to the client as content). */
  toolCallErrors: { raw: string; message: string }[];
  /** Null until checked (the check runs after the response is sent). */
  retemplate: RetemplateCheck | null;
}

/** What the session said after a main turn: the messages its next main request added. */
export interface NextState {
  /** A user reply, or all tool results of the turn's tool calls (and anything else that followed). */
  messages: ChatMessage[];
  /** The turn whose request carried these messages. */
  nextTurnId: string;
  arrivedAt: number;
}

/** A main turn that will get no further information: what the learning loop consumes. */
export interface ClosedTurn {
  turn: Turn;
  nextState: NextState | null;
  closure: ClosureReason;
  closedAt: number;
}

/** The learning queue's view of a closed turn (store table `closed_turns`). */
export type QueueStatus = 'pending' | 'claimed' | 'done' | 'excluded';

/**
 * Where a training sample's advantage comes from (the combined dispatch of the reference, §5.6):
 * - `rl`: the judge's decisive score alone (no accepted hint);
 * - `opd`: the teacher term alone (a hint, but an abstaining or unused score);
 * - `opd+rl`: both;
 * - `rl-zero`: a score-0 turn kept as its session's only sample (the original's option; no gradient);
 * - `steps`: a step of an episode with an outcome (the `steps` method); `steps+opd` with the teacher term too.
 */
export type SampleSource = 'rl' | 'opd' | 'opd+rl' | 'rl-zero' | 'steps' | 'steps+opd';

/**
 * `waiting`: a `steps` sample whose task group is not complete (no advantage yet); `queued` waits
 * for a batch, `trained` was consumed by one step, `stale` was dropped as too old,
 * `too_long` was dropped as longer than the learner's bound (a bound lowered since it was queued).
 */
export type SampleStatus = 'waiting' | 'queued' | 'trained' | 'stale' | 'too_long';

/**
 * Why a judged turn produced no sample: no next state, the judge abstained, no accepted hint (opd),
 * the teacher could not score the hint, prompt + completion exceed the learner's bound, or (`steps`)
 * the turn is no step of an episode (no session, or a superseded or cancelled turn).
 */
export type NoSampleReason = 'no_next_state' | 'abstained' | 'no_hint' | 'teacher_failed' | 'too_long' | 'not_a_step';

/** A training sample as the learning loop builds it from a judged turn, before the store numbers it. */
export interface SampleDraft {
  turnId: string;
  source: SampleSource;
  /** The policy version that sampled every completion token (Turn.policyVersion). */
  policyVersion: number;
  /** The judge's majority score. */
  score: -1 | 0 | 1;
  /** The constant part of every token's advantage: w_rl * score (0 without an RL term). */
  rlAdvantage: number;
  /** Weight of the per-token teacher term w_opd * (teacher_t - old_t); 0 without a teacher. */
  opdWeight: number;
  /** log p_teacher(completion_t | hinted prompt, completion_<t), one per completion token; null without a hint. */
  teacherLogprobs: number[] | null;
  /** The policy version that scored the teacher log-probs (0: the frozen base). */
  teacherVersion: number | null;
}

/** A stored sample with the token data of its turn, ready for the learner. */
export interface Sample extends SampleDraft {
  /** Store-assigned, increasing in the order samples were committed. */
  id: number;
  sessionId: string | null;
  /** `steps`: the step's reward and index, set when its task group is released; null otherwise. */
  reward: number | null;
  stepIndex: number | null;
  promptIds: number[];
  completionIds: number[];
  /** The sampler's log-probs at temperature 1 (Turn.logprobs), for importance correction. */
  rolloutLogprobs: number[];
  status: SampleStatus;
  createdAt: number;
}
