// Session-related request metadata from headers and body: identity, turn type, opt-out, trace.
// Header names (all case-insensitive):
//   X-Session-Id, x-session-affinity, session_id   session identity (see sessions/identity.ts)
//   X-Turn-Type: main|side                         turn kind
//   X-Learning-Opt-Out: 1|true|yes|on              this session is never learned from (sticky)
//   traceparent                                    W3C trace context (OpenClaw: one trace per agent run)
//   X-Task-Id: <1-256 printable ASCII>             rollout grouping: the task this session is a rollout of
//   X-Rollout-Index: <integer >= 0>                  which rollout of the task
//   X-Rollout-Count: <integer >= 1>                  how many rollouts the task has (the group size G)

import type { IncomingHttpHeaders } from 'node:http';
import { explicitIdentity, traceIdOf, type ExplicitIdentity } from '../sessions/identity.js';
import { parseTurnType } from '../sessions/kind.js';
import type { Rollout, TurnKind } from '../types.js';
import { invalid } from './errors.js';
import type { ChatRequest } from './params.js';

export const OPT_OUT_HEADER = 'x-learning-opt-out';

export interface RequestMeta {
  identity: ExplicitIdentity | undefined;
  turnType: TurnKind | undefined;
  optOut: boolean;
  traceId: string | null;
  /** Undefined when the request carries none of the rollout headers. */
  rollout: Rollout | undefined;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function parseFlag(value: string | undefined, name: string): boolean {
  if (value === undefined) return false;
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw invalid(name, `${name} must be 1/true/yes/on or 0/false/no/off, got "${value.slice(0, 40)}"`);
}

const MAX_TASK_ID = 256;
const TASK_ID = /^[\x20-\x7e]{1,256}$/;

function parseCount(value: string | undefined, name: string, min: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  const n = /^[0-9]{1,15}$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min)
    throw invalid(name, `${name} must be an integer >= ${min}, got "${value.slice(0, 40)}"`);
  return n;
}

/** The rollout headers, checked; undefined when none is present. */
export function parseRollout(headers: IncomingHttpHeaders): Rollout | undefined {
  const task = header(headers, 'x-task-id');
  const index = parseCount(header(headers, 'x-rollout-index'), 'X-Rollout-Index', 0);
  const count = parseCount(header(headers, 'x-rollout-count'), 'X-Rollout-Count', 1);
  if (task !== undefined && !TASK_ID.test(task))
    throw invalid(
      'X-Task-Id',
      `X-Task-Id must be 1 to ${MAX_TASK_ID} printable ASCII characters, got ${task.length} characters` +
        (task.length === 0 ? '' : ` starting "${task.slice(0, 40)}"`),
    );
  if (index !== null && count !== null && index >= count)
    throw invalid('X-Rollout-Index', `X-Rollout-Index must be below X-Rollout-Count (${count}), got ${index}`);
  if (task === undefined && index === null && count === null) return undefined;
  return { taskId: task ?? null, index, count };
}

/**
 * A session id as the `x-session-id` response header: HTTP header values are Latin-1 bytes, so
 * anything outside visible ASCII, and `%` itself, is percent-encoded as UTF-8
 * (`decodeURIComponent` gives the id back); ASCII ids without `%` or spaces are sent unchanged.
 * The id has no lone surrogates (identity.ts refuses them), so encoding cannot fail.
 */
export function sessionHeaderValue(id: string): string {
  return id.replace(/[^\x21-\x24\x26-\x7e]+/g, (run) => encodeURIComponent(run));
}

export function requestMeta(headers: IncomingHttpHeaders, req: ChatRequest): RequestMeta {
  const identity = explicitIdentity({
    xSessionId: header(headers, 'x-session-id'),
    bodySessionId: req.sessionId,
    affinity: header(headers, 'x-session-affinity'),
    sessionIdHeader: header(headers, 'session_id'),
    promptCacheKey: req.promptCacheKey,
    user: req.user,
  });
  if (!identity.ok) throw invalid(identity.field, identity.message);
  const rawType = header(headers, 'x-turn-type') ?? req.turnType;
  const turnType = parseTurnType(rawType);
  if (turnType === null)
    throw invalid('X-Turn-Type', `X-Turn-Type must be "main" or "side", got "${String(rawType).slice(0, 40)}"`);
  return {
    identity: identity.identity,
    turnType,
    optOut: parseFlag(header(headers, OPT_OUT_HEADER), 'X-Learning-Opt-Out'),
    traceId: traceIdOf(header(headers, 'traceparent')),
    rollout: parseRollout(headers),
  };
}
