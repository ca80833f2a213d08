// The session admin routes (behind the admin key):
//
//   DELETE /admin/sessions/:id         deletes a session and all its data (409 while a batch trains on it)
//   GET    /admin/sessions/:id/export  everything recorded about a session, as one JSON document

import type { TurnRecorder } from '../sessions/recorder.js';
import { SessionInTrainingError } from '../store/session-data.js';
import type { Store } from '../store/store.js';
import { GatewayError } from './errors.js';
import { sendJson, type Context } from './http.js';
import type { Logger } from './log.js';

export interface SessionsAdmin {
  store: Store;
  recorder: TurnRecorder;
  logger: Logger;
}

export function deleteSession(ctx: Context, { store, recorder, logger }: SessionsAdmin): void {
  const id = ctx.params.id!;
  ctx.log.sessionId = id;
  // Refused before the recorder lets go of the session, so a refusal changes nothing.
  const held = store.heldSamplesOfSession(id);
  if (held > 0) throw sessionInTraining(new SessionInTrainingError(id, held));
  recorder.forget(id);
  let turns: number | null;
  try {
    turns = store.deleteSession(id);
  } catch (e) {
    throw e instanceof SessionInTrainingError ? sessionInTraining(e) : e;
  }
  if (turns === null) throw notFound(id);
  logger.event('session_deleted', { sessionId: id, turns });
  sendJson(ctx, 200, { deleted: true, session_id: id, turns });
}

export function exportSession(ctx: Context, { store, logger }: SessionsAdmin): void {
  const id = ctx.params.id!;
  ctx.log.sessionId = id;
  const data = store.exportSession(id);
  if (data === null) throw notFound(id);
  logger.event('session_exported', { sessionId: id, turns: data.turns.length });
  sendJson(ctx, 200, data);
}

const notFound = (id: string) =>
  new GatewayError(404, `no session "${id}" in the store`, { code: 'session_not_found' });

function sessionInTraining(e: SessionInTrainingError): GatewayError {
  return new GatewayError(409, e.message, { code: 'session_in_training', headers: { 'retry-after': '30' } });
}
