// The versions admin routes (behind the admin key):
//
//   GET  /admin/versions             every published version, newest first (VersionSummary)
//   POST /admin/versions/rollback    { "version": N }: publishes N's weights as a new version;
//                                    answers once the trainer has (between two batches)
//
// serve passes the learning loop's side as `VersionsAdmin`; without learning both answer 409.

import { RollbackRefused } from '../learn/rollback.js';
import type { RollbackRequest, VersionSummary } from '../store/versions.js';
import { GatewayError, invalid } from './errors.js';
import { sendJson, type Context } from './http.js';

export interface VersionsAdmin {
  list(): VersionSummary[];
  rollback(target: number): Promise<RollbackRequest>;
}

const LEARNING_OFF = () =>
  new GatewayError(409, 'learning is off (--no-learning): there are no versions to list or roll back', {
    code: 'learning_disabled',
  });

export function listVersions(ctx: Context, versions: VersionsAdmin | undefined): void {
  if (!versions) throw LEARNING_OFF();
  sendJson(ctx, 200, { object: 'list', data: versions.list() });
}

export async function rollbackVersion(ctx: Context, versions: VersionsAdmin | undefined): Promise<void> {
  if (!versions) throw LEARNING_OFF();
  const body = ctx.json as Record<string, unknown> | null;
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid(null, 'the body must be a JSON object such as {"version": 3}');
  const extra = Object.keys(body).filter((k) => k !== 'version');
  if (extra.length > 0) throw invalid(extra[0]!, `unknown field "${extra[0]}": the body takes only "version"`);
  const target = body.version;
  if (!(typeof target === 'number' && Number.isInteger(target) && target >= 0))
    throw invalid('version', `"version" must be a non-negative integer (a version from GET /admin/versions)`);
  let r: RollbackRequest;
  try {
    r = await versions.rollback(target);
  } catch (e) {
    if (!(e instanceof RollbackRefused)) throw e;
    const status = e.code === 'rollback_unavailable' ? 409 : 400;
    throw new GatewayError(status, e.message, { param: status === 400 ? 'version' : null, code: e.code });
  }
  if (r.status === 'done')
    return sendJson(ctx, 200, { rolled_back: true, request: r.id, restores: r.target, version: r.publishedVersion });
  if (r.status === 'refused')
    throw new GatewayError(400, r.message ?? 'refused', { param: 'version', code: 'refused' });
  // Still pending: serve is stopping or the trainer stopped; the row stays for the next start.
  throw new GatewayError(503, r.message ?? 'the rollback is pending', { code: 'rollback_pending' });
}
