// What a request states about its session: which session it names, and the rollout grouping its
// headers give (fixed by the session's first request that states one).

import type { Rollout, SessionSource } from '../types.js';
import { runtimeSessionId } from './openclaw.js';
import { RolloutConflictError, type IncomingRequest } from './recorder-contract.js';

/**
 * The session a request names: explicit identity (headers, body), else the `sessionId=` of
 * OpenClaw's `Runtime:` line. A named session outranks history matching: two sessions can open
 * with the same message, and the second must not be taken for a retry of the first.
 */
export function statedSession(req: IncomingRequest): { sessionId: string; source: SessionSource } | undefined {
  if (req.identity) return { sessionId: req.identity.sessionId, source: req.identity.source };
  const runtime = runtimeSessionId(req.messages);
  return runtime === undefined ? undefined : { sessionId: runtime, source: 'runtime' };
}

/**
 * The session's rollout grouping once a request states `given`: the first statement fixes it; a
 * later request may repeat any of its values or leave them out, never change them (that would move
 * a rollout between groups after its first steps were recorded): RolloutConflictError.
 */
export function fixedRollout(sessionId: string, fixed: Rollout | null, given: Rollout): Rollout {
  if (fixed === null) return given;
  const fields = [
    ['X-Task-Id', 'taskId'],
    ['X-Rollout-Index', 'index'],
    ['X-Rollout-Count', 'count'],
  ] as const;
  for (const [name, key] of fields) {
    const value = given[key];
    const kept = fixed[key];
    if (value === null || value === kept) continue;
    throw new RolloutConflictError(
      name,
      `session "${sessionId.slice(0, 80)}" was given ${name} ${kept === null ? '(none)' : JSON.stringify(kept)} by ` +
        `its first request with rollout headers; a session is one rollout and keeps them: got ${JSON.stringify(value)}`,
    );
  }
  return fixed;
}
