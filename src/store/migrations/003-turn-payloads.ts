// Schema 3: a turn's write-once payload (messages, tools, token ids, log-probs, response) moves to
// its own table. SQLite rewrites a whole record, overflow pages included, on any UPDATE: with the
// payload inline, closing a turn of a long agent session (a 300 kB row) rewrote 300 kB on the
// serving thread, and scans of `turns` walked the payload's pages. bench/store.ts, 100 kB of
// messages: closure 1.3 -> 0.1 ms, re-template check 0.8 -> 0.04 ms (p50).
//
// `turns` loses columns that its CHECKs use, which DROP COLUMN refuses, so it is rebuilt (SQLite's
// 12-step procedure: create, copy with the rowids, drop, rename). The runner turns foreign keys
// off around it (`rebuildsTables`), or dropping `turns` would cascade into every table below it.

import type { Migration } from './index.js';

// The small columns every reader of a turn wants, in schema 1's order.
const KEPT = `id, session_id, session_source, kind, kind_reason, compaction, trace_id, model, sampling, finish_reason,
  policy_version, prompt_tokens, completion_tokens, received_at, first_token_at, completed_at, tool_call_errors, retemplate,
  closure_reason, closed_at`;

const INDEXES = `
  CREATE INDEX turns_by_session ON turns (session_id, received_at);
  CREATE INDEX turns_open_main ON turns (completed_at) WHERE kind = 'main' AND closure_reason IS NULL;
`;

export const migration003: Migration = {
  version: 3,
  name: 'turn-payloads',
  rebuildsTables: true,
  up: `
    CREATE TABLE turn_payloads (
      turn_id          TEXT PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
      messages         TEXT NOT NULL,
      tools            TEXT,
      prompt_ids       BLOB NOT NULL,
      completion_ids   BLOB NOT NULL,
      logprobs         BLOB NOT NULL,
      sampled_logprobs BLOB NOT NULL,
      response         TEXT NOT NULL,
      CHECK (length(prompt_ids) % 4 = 0 AND length(completion_ids) % 4 = 0),
      CHECK (length(logprobs) = 2 * length(completion_ids) AND length(sampled_logprobs) = 2 * length(completion_ids))
    ) STRICT;
    INSERT INTO turn_payloads (turn_id, messages, tools, prompt_ids, completion_ids, logprobs, sampled_logprobs, response)
      SELECT id, messages, tools, prompt_ids, completion_ids, logprobs, sampled_logprobs, response FROM turns ORDER BY rowid;

    CREATE TABLE turns_new (
      id                TEXT PRIMARY KEY,
      session_id        TEXT REFERENCES sessions(id) ON DELETE CASCADE,
      session_source    TEXT NOT NULL,
      kind              TEXT NOT NULL CHECK (kind IN ('main', 'side')),
      kind_reason       TEXT NOT NULL,
      compaction        INTEGER,
      trace_id          TEXT,
      model             TEXT NOT NULL,
      sampling          TEXT NOT NULL,
      finish_reason     TEXT NOT NULL,
      policy_version    INTEGER NOT NULL,
      prompt_tokens     INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      received_at       INTEGER NOT NULL,
      first_token_at    INTEGER,
      completed_at      INTEGER NOT NULL,
      tool_call_errors  TEXT,
      retemplate        TEXT,
      closure_reason    TEXT REFERENCES closure_reasons(reason),
      closed_at         INTEGER,
      CHECK ((closure_reason IS NULL) = (closed_at IS NULL)),
      CHECK (kind = 'main' OR closure_reason IS NULL)
    ) STRICT;
    -- The rowids too: export and the learning queue read turns in rowid (commit) order.
    INSERT INTO turns_new (rowid, ${KEPT}) SELECT rowid, ${KEPT} FROM turns;
    DROP TABLE turns;
    ALTER TABLE turns_new RENAME TO turns;
    ${INDEXES}

    -- Schema 1's CHECKs of the token counts against the blobs' lengths, across the two tables now
    -- (a CHECK cannot read another table). Created after the rename, which rewrites triggers.
    CREATE TRIGGER turn_payloads_match_turn BEFORE INSERT ON turn_payloads
    WHEN NOT EXISTS (SELECT 1 FROM turns WHERE id = NEW.turn_id
      AND 4 * prompt_tokens = length(NEW.prompt_ids) AND 4 * completion_tokens = length(NEW.completion_ids))
    BEGIN
      SELECT RAISE(ABORT, 'CHECK constraint failed: turn_payloads_match_turn (token ids do not match the turn''s prompt_tokens and completion_tokens)');
    END;
  `,
  // Schema 1's turns table, word for word, refilled from both tables.
  down: `
    CREATE TABLE turns_old (
      id                TEXT PRIMARY KEY,
      session_id        TEXT REFERENCES sessions(id) ON DELETE CASCADE,
      session_source    TEXT NOT NULL,
      kind              TEXT NOT NULL CHECK (kind IN ('main', 'side')),
      kind_reason       TEXT NOT NULL,
      compaction        INTEGER,
      trace_id          TEXT,
      model             TEXT NOT NULL,
      messages          TEXT NOT NULL,
      tools             TEXT,
      sampling          TEXT NOT NULL,
      prompt_ids        BLOB NOT NULL,
      completion_ids    BLOB NOT NULL,
      logprobs          BLOB NOT NULL,
      sampled_logprobs  BLOB NOT NULL,
      response          TEXT NOT NULL,
      finish_reason     TEXT NOT NULL,
      policy_version    INTEGER NOT NULL,
      prompt_tokens     INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      received_at       INTEGER NOT NULL,
      first_token_at    INTEGER,
      completed_at      INTEGER NOT NULL,
      tool_call_errors  TEXT,
      retemplate        TEXT,
      closure_reason    TEXT REFERENCES closure_reasons(reason),
      closed_at         INTEGER,
      CHECK (length(prompt_ids) = 4 * prompt_tokens),
      CHECK (length(completion_ids) = 4 * completion_tokens),
      CHECK (length(logprobs) = 8 * completion_tokens AND length(sampled_logprobs) = 8 * completion_tokens),
      CHECK ((closure_reason IS NULL) = (closed_at IS NULL)),
      CHECK (kind = 'main' OR closure_reason IS NULL)
    ) STRICT;
    -- LEFT JOIN: a turn without its payload fails NOT NULL here instead of vanishing. The two
    -- tables share no column name, so none needs its table's prefix.
    INSERT INTO turns_old (rowid, ${KEPT}, messages, tools, prompt_ids, completion_ids, logprobs, sampled_logprobs, response)
      SELECT t.rowid, ${KEPT}, messages, tools, prompt_ids, completion_ids, logprobs, sampled_logprobs, response
      FROM turns t LEFT JOIN turn_payloads p ON p.turn_id = t.id;
    DROP TABLE turn_payloads;
    DROP TABLE turns;
    ALTER TABLE turns_old RENAME TO turns;
    ${INDEXES}
  `,
};
