// Schema 1: sessions, turns (exact token data), next states, closure reasons and the closed-turn
// queue the learning loop consumes. Token ids are int32 and log-probs float64, little-endian BLOBs.

import type { Migration } from './index.js';

export const migration001: Migration = {
  version: 1,
  name: 'initial',
  up: `
    CREATE TABLE closure_reasons (
      reason      TEXT PRIMARY KEY,
      description TEXT NOT NULL
    ) STRICT;
    INSERT INTO closure_reasons (reason, description) VALUES
      ('next_state',    'the session''s next main request extended the turn; its new messages are the next state'),
      ('diverged',      'the next main request did not extend the turn (compaction, an edit, a concurrent branch)'),
      ('superseded',    'a retry of the same request replaced the turn; the client never kept this answer'),
      ('no_next_state', 'the session stayed idle past the configured time, or was released from memory'),
      ('cancelled',     'the client went away before the end; the generation was stopped');

    CREATE TABLE sessions (
      id           TEXT PRIMARY KEY,
      source       TEXT NOT NULL,
      created_at   INTEGER NOT NULL,
      last_seen_at INTEGER NOT NULL,
      learning     INTEGER NOT NULL DEFAULT 1 CHECK (learning IN (0, 1))
    ) STRICT;

    CREATE TABLE turns (
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
    CREATE INDEX turns_by_session ON turns (session_id, received_at);
    CREATE INDEX turns_open_main ON turns (completed_at) WHERE kind = 'main' AND closure_reason IS NULL;

    CREATE TABLE next_states (
      turn_id      TEXT PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
      next_turn_id TEXT NOT NULL,
      messages     TEXT NOT NULL,
      arrived_at   INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE closed_turns (
      turn_id     TEXT PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
      status      TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done', 'excluded')),
      enqueued_at INTEGER NOT NULL,
      updated_at  INTEGER NOT NULL,
      attempts    INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX closed_turns_by_status ON closed_turns (status);
  `,
  down: `
    DROP TABLE closed_turns;
    DROP TABLE next_states;
    DROP TABLE turns;
    DROP TABLE sessions;
    DROP TABLE closure_reasons;
  `,
};
