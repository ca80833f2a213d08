// Rows <-> records, in named functions. Token ids travel as int32 and log-probs as float64 BLOBs,
// both little-endian, so what was sampled is what is read back, bit for bit.

import type { FinishReason } from '../engine/types.js';
import type { RecordedNextState } from '../sessions/next-state.js';
import type { ClosedTurn, ClosureReason, SessionSource, Turn } from '../types.js';
import type { FullTurnRow, NextStateRow, TurnWithNextStateRow } from './tables.js';

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

// Through typed arrays, not Buffer.writeInt32LE per element: a 25,000-token prompt (a long agent
// session) encodes in about 0.1 ms instead of 0.45 ms, and the turn's commit waits for it.
export function encodeIds(ids: readonly number[]): Buffer {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < -0x80000000 || id > 0x7fffffff)
      throw new RangeError(`token id ${id} at ${i} is not a 32-bit integer`);
  }
  return toBlob(Int32Array.from(ids));
}

export function decodeIds(bytes: Uint8Array): number[] {
  return Array.from(new Int32Array(...hostOrder(bytes, 4)));
}

export function encodeFloats(values: readonly number[]): Buffer {
  return toBlob(Float64Array.from(values));
}

export function decodeFloats(bytes: Uint8Array): number[] {
  return Array.from(new Float64Array(...hostOrder(bytes, 8)));
}

/** The typed array's bytes as a little-endian blob (swapped in place on a big-endian host). */
function toBlob(typed: Int32Array | Float64Array): Buffer {
  const blob = Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
  if (LITTLE_ENDIAN) return blob;
  return typed.BYTES_PER_ELEMENT === 4 ? blob.swap32() : blob.swap64();
}

/**
 * (buffer, offset, length) over a little-endian blob of `size`-byte elements in the host's byte
 * order: a view when it already is and is aligned, else a copy (swapped on a big-endian host).
 */
function hostOrder(bytes: Uint8Array, size: 4 | 8): [ArrayBufferLike, number, number] {
  let host = bytes;
  if (!LITTLE_ENDIAN) host = size === 4 ? Buffer.from(bytes).swap32() : Buffer.from(bytes).swap64();
  else if (bytes.byteOffset % size !== 0) host = new Uint8Array(bytes); // new Uint8Array(view) copies
  if (host.byteOffset % size !== 0) host = new Uint8Array(host);
  return [host.buffer, host.byteOffset, bytes.byteLength / size];
}

/** A turn's request side as stored: the columns that grow with the conversation. */
export interface EncodedInputs {
  messages: string;
  tools: string | null;
  promptIds: Buffer;
}

export function encodeInputs(
  messages: Turn['messages'],
  tools: Turn['tools'],
  promptIds: readonly number[],
): EncodedInputs {
  return {
    messages: JSON.stringify(messages),
    tools: tools === null ? null : JSON.stringify(tools),
    promptIds: encodeIds(promptIds),
  };
}

export function turnToRow(
  turn: Turn,
  closure?: { reason: ClosureReason; closedAt: number },
  inputs: EncodedInputs = encodeInputs(turn.messages, turn.tools, turn.promptIds),
): FullTurnRow {
  if (turn.logprobs.length !== turn.completionIds.length || turn.sampledLogprobs.length !== turn.completionIds.length) {
    throw new Error(
      `turn ${turn.id}: ${turn.completionIds.length} completion ids but ${turn.logprobs.length} logprobs and ${turn.sampledLogprobs.length} sampled logprobs`,
    );
  }
  return {
    id: turn.id,
    session_id: turn.sessionId,
    session_source: turn.sessionSource,
    kind: turn.kind,
    kind_reason: turn.kindReason,
    compaction: turn.compaction,
    trace_id: turn.traceId,
    model: turn.model,
    messages: inputs.messages,
    tools: inputs.tools,
    sampling: JSON.stringify(turn.sampling),
    prompt_ids: inputs.promptIds,
    completion_ids: encodeIds(turn.completionIds),
    logprobs: encodeFloats(turn.logprobs),
    sampled_logprobs: encodeFloats(turn.sampledLogprobs),
    response: JSON.stringify(turn.response),
    finish_reason: turn.finishReason,
    policy_version: turn.policyVersion,
    prompt_tokens: turn.promptIds.length,
    completion_tokens: turn.completionIds.length,
    received_at: turn.receivedAt,
    first_token_at: turn.firstTokenAt,
    completed_at: turn.completedAt,
    tool_call_errors: turn.toolCallErrors.length === 0 ? null : JSON.stringify(turn.toolCallErrors),
    retemplate: turn.retemplate === null ? null : JSON.stringify(turn.retemplate),
    closure_reason: closure?.reason ?? null,
    closed_at: closure?.closedAt ?? null,
  };
}

export function rowToTurn(row: FullTurnRow): Turn {
  return {
    id: row.id,
    sessionId: row.session_id,
    sessionSource: row.session_source as SessionSource,
    kind: row.kind,
    kindReason: row.kind_reason,
    compaction: row.compaction,
    traceId: row.trace_id,
    model: row.model,
    messages: JSON.parse(row.messages),
    tools: row.tools === null ? null : JSON.parse(row.tools),
    sampling: JSON.parse(row.sampling),
    promptIds: decodeIds(row.prompt_ids),
    completionIds: decodeIds(row.completion_ids),
    logprobs: decodeFloats(row.logprobs),
    sampledLogprobs: decodeFloats(row.sampled_logprobs),
    response: JSON.parse(row.response),
    finishReason: row.finish_reason as FinishReason,
    policyVersion: row.policy_version,
    receivedAt: row.received_at,
    firstTokenAt: row.first_token_at,
    completedAt: row.completed_at,
    toolCallErrors: row.tool_call_errors === null ? [] : JSON.parse(row.tool_call_errors),
    retemplate: row.retemplate === null ? null : JSON.parse(row.retemplate),
  };
}

export function nextStateToRow(turnId: string, next: RecordedNextState): NextStateRow {
  return {
    turn_id: turnId,
    next_turn_id: next.nextTurnId,
    messages: JSON.stringify(next.messages),
    arrived_at: next.arrivedAt,
    raw_messages: next.rawMessages ? JSON.stringify(next.rawMessages) : null,
  };
}

export function rowToNextState(row: TurnWithNextStateRow): RecordedNextState | null {
  if (row.ns_messages === null) return null;
  const next: RecordedNextState = {
    messages: JSON.parse(row.ns_messages),
    nextTurnId: row.ns_next_turn_id!,
    arrivedAt: row.ns_arrived_at!,
  };
  if (row.ns_raw_messages !== null) next.rawMessages = JSON.parse(row.ns_raw_messages);
  return next;
}

/** A closed main turn; throws for a row that is not closed (a caller bug). */
export function rowToClosedTurn(row: TurnWithNextStateRow): ClosedTurn {
  if (row.closure_reason === null || row.closed_at === null) throw new Error(`turn ${row.id} is not closed`);
  return {
    turn: rowToTurn(row),
    nextState: rowToNextState(row),
    closure: row.closure_reason as ClosureReason,
    closedAt: row.closed_at,
  };
}

/** One line of `openclaw-rl export`: everything recorded about a turn, snake_case like the API. */
export interface ExportLine {
  turn_id: string;
  session_id: string | null;
  session_source: SessionSource;
  kind: Turn['kind'];
  kind_reason: string;
  model: string;
  messages: Turn['messages'];
  tools: Turn['tools'];
  response: Turn['response'];
  prompt_ids: number[];
  completion_ids: number[];
  logprobs: number[];
  sampled_logprobs: number[];
  policy_version: number;
  sampling: Turn['sampling'];
  finish_reason: FinishReason;
  trace_id: string | null;
  compaction: number | null;
  received_at: number;
  completed_at: number;
  retemplate: Turn['retemplate'];
  next_state: RecordedNextState | null;
  closure_reason: ClosureReason | null;
  closed_at: number | null;
}

export function rowToExportLine(row: TurnWithNextStateRow): ExportLine {
  const t = rowToTurn(row);
  return {
    turn_id: t.id,
    session_id: t.sessionId,
    session_source: t.sessionSource,
    kind: t.kind,
    kind_reason: t.kindReason,
    model: t.model,
    messages: t.messages,
    tools: t.tools,
    response: t.response,
    prompt_ids: t.promptIds,
    completion_ids: t.completionIds,
    logprobs: t.logprobs,
    sampled_logprobs: t.sampledLogprobs,
    policy_version: t.policyVersion,
    sampling: t.sampling,
    finish_reason: t.finishReason,
    trace_id: t.traceId,
    compaction: t.compaction,
    received_at: t.receivedAt,
    completed_at: t.completedAt,
    retemplate: t.retemplate,
    next_state: rowToNextState(row),
    closure_reason: row.closure_reason as ClosureReason | null,
    closed_at: row.closed_at,
  };
}
