// Session identity from what the client sent explicitly, first match wins:
//   X-Session-Id (or body session_id)  -> the original OpenClaw-RL patched client
//   x-session-affinity / session_id     -> OpenClaw's affinity headers, "<sessionId>:<n>"
//   body prompt_cache_key               -> OpenClaw, same format
//   body user                           -> namespaced "user:<value>"
// Without these, the recorder (recorder.ts) reads the sessionId of OpenClaw's Runtime line, and
// only a request that names no session at all is matched against known sessions by its history.

import type { SessionSource } from '../types.js';

/** The identity-bearing parts of a request, already extracted from headers and body. */
export interface IdentityInput {
  xSessionId?: string;
  bodySessionId?: string;
  affinity?: string;
  sessionIdHeader?: string;
  promptCacheKey?: string;
  user?: string;
}

export interface ExplicitIdentity {
  sessionId: string;
  source: Exclude<SessionSource, 'inferred' | 'runtime' | 'new' | 'none'>;
  /** The `:n` OpenClaw appends (compactions so far); null when absent. */
  compaction: number | null;
  /** The key as sent (e.g. `openclaw-cron-...`), for side-task recognition. */
  rawKey: string;
}

export type IdentityResult =
  | { ok: true; identity: ExplicitIdentity | undefined }
  | { ok: false; field: string; message: string };

const MAX_ID_LENGTH = 256;

/** `<sessionId>:<n>` -> (sessionId, n); a key without a numeric suffix is the id itself. */
export function splitAffinityKey(key: string): { id: string; compaction: number | null } {
  const match = /^(.+):(\d{1,9})$/.exec(key);
  return match ? { id: match[1]!, compaction: Number(match[2]) } : { id: key, compaction: null };
}

/** Half of a UTF-16 surrogate pair without the other: not text, and SQLite would store U+FFFD instead. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkId(value: string, field: string): string | undefined {
  if (
    value.length === 0 ||
    value.length > MAX_ID_LENGTH ||
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this rejects
    /[\u0000-\u001f\u007f]/.test(value) ||
    LONE_SURROGATE.test(value)
  ) {
    return `${field} must be 1-${MAX_ID_LENGTH} printable characters (Unicode text, no control characters or lone surrogates)`;
  }
  return undefined;
}

export function explicitIdentity(input: IdentityInput): IdentityResult {
  const candidates: [string | undefined, string, ExplicitIdentity['source'], boolean][] = [
    [input.xSessionId, 'X-Session-Id header', 'x-session-id', false],
    [input.bodySessionId, 'session_id', 'x-session-id', false],
    [input.affinity, 'x-session-affinity header', 'affinity', true],
    [input.sessionIdHeader, 'session_id header', 'affinity', true],
    [input.promptCacheKey, 'prompt_cache_key', 'prompt_cache_key', true],
    [input.user, 'user', 'user', false],
  ];
  for (const [value, field, source, affinityFormat] of candidates) {
    if (value === undefined) continue;
    const error = checkId(value, field);
    if (error) return { ok: false, field, message: error };
    if (affinityFormat) {
      const { id, compaction } = splitAffinityKey(value);
      return { ok: true, identity: { sessionId: id, source, compaction, rawKey: value } };
    }
    const sessionId = source === 'user' ? `user:${value}` : value;
    return { ok: true, identity: { sessionId, source, compaction: null, rawKey: value } };
  }
  return { ok: true, identity: undefined };
}

/** The trace-id of a W3C `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`), if well formed. */
export function traceIdOf(traceparent: string | undefined): string | null {
  const match = traceparent ? /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(traceparent.trim()) : null;
  return match && !/^0+$/.test(match[1]!) ? match[1]! : null;
}
