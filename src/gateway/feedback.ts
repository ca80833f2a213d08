// POST /v1/feedback: an outcome reward for a session, or a reward for one of its main turns, from
// an environment (the task's result) or a person (a rating).
//
//   body     { "session_id": string, "reward": number in [-1, 1], "turn_id"?: string,
//              "comment"?: string (<= 4000 characters), "key"?: string }
//   header   Idempotency-Key: <1-256 printable ASCII>   (or body "key"; one of them is required)
//   200      { "id", "session_id", "turn_id", "reward", "duplicate" }
//
// The same key with the same feedback again answers 200 with duplicate: true and stores nothing; with
// different feedback 409. An outcome (no turn_id) ends the episode: the session's last open main
// turn is closed (`episode_end`) and goes to the judge and the learner. Comments are never logged.

import { randomUUID } from 'node:crypto';
import type { TurnRecorder } from '../sessions/recorder.js';
import type { FeedbackRecord, FeedbackResult } from '../store/feedback.js';
import type { Store } from '../store/store.js';
import { GatewayError, invalid } from './errors.js';
import { sendJson, type Handler } from './http.js';
import type { Logger } from './log.js';
import { isObject } from './validate.js';

export interface FeedbackDeps {
  store: Store;
  recorder: TurnRecorder;
  logger: Logger;
  now: () => number;
}

export const MAX_COMMENT_CHARS = 4000;
const MAX_ID = 256;
const KEY = /^[\x21-\x7e][\x20-\x7e]{0,255}$/;
const FIELDS = ['session_id', 'reward', 'turn_id', 'comment', 'key'];

/** What the request asks to store, checked. */
export interface FeedbackRequest {
  key: string;
  sessionId: string;
  turnId: string | null;
  reward: number;
  comment: string | null;
}

export function parseFeedback(body: unknown, keyHeader: string | undefined): FeedbackRequest {
  if (!isObject(body)) throw invalid(null, 'the body must be a JSON object', 'invalid_type');
  const unknown = Object.keys(body).filter((k) => !FIELDS.includes(k));
  if (unknown.length > 0)
    throw invalid(
      unknown[0]!,
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown
        .slice(0, 5)
        .map((k) => JSON.stringify(k.slice(0, 40)))
        .join(', ')}: the accepted fields are ${FIELDS.join(', ')}`,
      'unknown_field',
    );
  const id = (name: string, required: boolean): string | null => {
    const v = body[name];
    if (v === undefined || v === null) {
      if (required) throw invalid(name, `${name} is required: the session id the chat responses named`, 'missing');
      return null;
    }
    if (typeof v !== 'string' || v.length === 0 || v.length > MAX_ID)
      throw invalid(name, `${name} must be a string of 1 to ${MAX_ID} characters`, 'invalid_type');
    return v;
  };
  const sessionId = id('session_id', true)!;
  const turnId = id('turn_id', false);
  const reward = body.reward;
  if (typeof reward !== 'number' || !Number.isFinite(reward) || reward < -1 || reward > 1)
    throw invalid('reward', `reward must be a number from -1 to 1, got ${JSON.stringify(reward ?? null)}`);
  const comment = body.comment ?? null;
  if (comment !== null && (typeof comment !== 'string' || comment.length > MAX_COMMENT_CHARS))
    throw invalid('comment', `comment must be a string of at most ${MAX_COMMENT_CHARS} characters`, 'invalid_type');
  const bodyKey = body.key ?? undefined;
  if (bodyKey !== undefined && typeof bodyKey !== 'string')
    throw invalid('key', 'key must be a string (the idempotency key)', 'invalid_type');
  if (keyHeader !== undefined && bodyKey !== undefined && keyHeader !== bodyKey)
    throw invalid('key', 'the Idempotency-Key header and the body "key" differ: send one of them');
  const key = keyHeader ?? bodyKey;
  if (key === undefined)
    throw invalid(
      'Idempotency-Key',
      'an idempotency key is required: send the header "Idempotency-Key: <unique per feedback>" or the body "key"',
      'missing',
    );
  if (!KEY.test(key))
    throw invalid('Idempotency-Key', `the idempotency key must be 1 to ${MAX_ID} printable ASCII characters`);
  return { key, sessionId, turnId, reward, comment: comment as string | null };
}

/** `fb_` + 12 hex digits of the time + 12 random, like turn ids. */
function newFeedbackId(now: number): string {
  return `fb_${Math.floor(now).toString(16).padStart(12, '0').slice(-12)}${randomUUID().slice(-12)}`;
}

export function feedbackHandler(deps: FeedbackDeps): Handler {
  return async function feedback(ctx) {
    const raw = ctx.req.headers['idempotency-key'];
    const request = parseFeedback(ctx.json, Array.isArray(raw) ? raw[0] : raw);
    Object.assign(ctx.log, { sessionId: request.sessionId, turnId: request.turnId ?? undefined });
    // The session's turns answered so far are in the store before the outcome closes the last one.
    await deps.recorder.flushed();
    const now = deps.now();
    const result = deps.store.feedback.recordFeedback({ ...request, id: newFeedbackId(now), createdAt: now });
    const stored = answerOf(result, request);
    if (result.status === 'stored' && result.closedTurnId !== null)
      deps.recorder.episodeEnded(request.sessionId, result.closedTurnId);
    ctx.log.feedbackId = stored.id;
    ctx.log.duplicate = result.status === 'duplicate';
    if (result.status === 'stored') {
      deps.logger.event('feedback', {
        feedbackId: stored.id,
        sessionId: stored.sessionId,
        turnId: stored.turnId,
        reward: stored.reward,
        comment: stored.comment !== null,
        episodeEnded: result.closedTurnId,
      });
    }
    sendJson(ctx, 200, {
      id: stored.id,
      session_id: stored.sessionId,
      turn_id: stored.turnId,
      reward: stored.reward,
      duplicate: result.status === 'duplicate',
    });
  };
}

/** The stored (or earlier identical) feedback, or the error the result stands for. */
function answerOf(result: FeedbackResult, request: FeedbackRequest): FeedbackRecord {
  switch (result.status) {
    case 'stored':
    case 'duplicate':
      return result.feedback;
    case 'key_conflict':
      throw new GatewayError(
        409,
        `idempotency key already used by feedback ${result.feedback.id} with a different body: ` +
          'use a new key for new feedback, or resend exactly the same body',
        { code: 'idempotency_conflict' },
      );
    case 'already_given':
      throw new GatewayError(
        409,
        request.turnId === null
          ? `session "${request.sessionId}" already has an outcome (feedback ${result.feedback.id}): an episode has one`
          : `turn "${request.turnId}" already has a reward (feedback ${result.feedback.id})`,
        { code: 'feedback_exists' },
      );
    case 'session_not_found':
      throw new GatewayError(
        404,
        `no session "${request.sessionId}": use the id of the x-session-id response header ` +
          '(or the X-Session-Id you sent)',
        { code: 'session_not_found' },
      );
    case 'turn_not_found':
      throw new GatewayError(
        404,
        `session "${request.sessionId}" has no turn "${request.turnId}": ` +
          'use the x-turn-id response header of one of its requests',
        { code: 'turn_not_found' },
      );
    case 'side_turn':
      throw invalid(
        'turn_id',
        `turn "${request.turnId}" is a side turn, which is never learned from: rate a main turn, or the session`,
        'side_turn',
      );
    case 'opted_out':
      throw new GatewayError(
        403,
        `session "${request.sessionId}" opted out of learning (X-Learning-Opt-Out): its feedback is not stored`,
        { code: 'learning_opt_out' },
      );
  }
}
