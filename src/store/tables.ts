// Row types, one per table, exactly as SQLite returns them (snake_case, JSON as text, token data
// as BLOBs). Domain records live in src/types.ts; store/records.ts converts between the two.

export interface SessionRow {
  id: string;
  source: string;
  created_at: number;
  last_seen_at: number;
  learning: 0 | 1;
}

/** The small, mutable part of a turn: what scans and updates (closure, re-template check) touch. */
export interface TurnRow {
  id: string;
  session_id: string | null;
  session_source: string;
  kind: 'main' | 'side';
  kind_reason: string;
  compaction: number | null;
  trace_id: string | null;
  model: string;
  /** JSON SamplingUsed */
  sampling: string;
  finish_reason: string;
  policy_version: number;
  prompt_tokens: number;
  completion_tokens: number;
  received_at: number;
  first_token_at: number | null;
  completed_at: number;
  /** JSON array or null */
  tool_call_errors: string | null;
  /** JSON RetemplateCheck or null (not checked yet) */
  retemplate: string | null;
  closure_reason: string | null;
  closed_at: number | null;
}

/** A turn's write-once payload, the part that grows with the conversation (turn_payloads). */
export interface TurnPayloadRow {
  turn_id: string;
  /** JSON ChatMessage[] */
  messages: string;
  /** JSON ToolSpec[] or null */
  tools: string | null;
  /** int32 little-endian */
  prompt_ids: Uint8Array;
  completion_ids: Uint8Array;
  /** float64 little-endian */
  logprobs: Uint8Array;
  sampled_logprobs: Uint8Array;
  /** JSON ChatMessage */
  response: string;
}

/** A whole turn: its row with its payload's columns (inserts, and reads that join the two). */
export type FullTurnRow = TurnRow & Omit<TurnPayloadRow, 'turn_id'>;

export interface NextStateRow {
  turn_id: string;
  next_turn_id: string;
  /** JSON ChatMessage[]: what the judge and the learner read */
  messages: string;
  arrived_at: number;
  /** JSON ChatMessage[] as received, when that differs from `messages` (schema 6); else null */
  raw_messages: string | null;
}

export interface ClosedTurnRow {
  turn_id: string;
  status: 'pending' | 'claimed' | 'done' | 'excluded';
  enqueued_at: number;
  updated_at: number;
  attempts: number;
}

/** A turn joined with its next state (the shape of export and queue reads). */
export type TurnWithNextStateRow = FullTurnRow & {
  ns_next_turn_id: string | null;
  ns_messages: string | null;
  ns_arrived_at: number | null;
  ns_raw_messages: string | null;
};
