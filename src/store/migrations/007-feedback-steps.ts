// Schema 7: general agents. Rollout grouping on sessions (the X-Task-Id, X-Rollout-Index and
// X-Rollout-Count headers, fixed by the session's first request that carries them), the feedback
// table of POST /v1/feedback (an outcome for a session, or a reward for one turn, idempotent per
// key), the `episode_end` closure (an outcome ends the episode), and what the `steps` method stores
// on a sample: its source (`steps`, `steps+opd`), its `waiting` status (judged, its task group not
// complete yet), its reward and its step index. `samples` has CHECKs, which ALTER cannot change, so
// it is rebuilt as in schema 5 (ids and the id counter kept; nothing references it).

import type { Migration } from './index.js';

const SAMPLE_COLUMNS = `id, turn_id, source, policy_version, score, rl_advantage, opd_weight, teacher_logprobs, teacher_version,
  status, created_at, trained_step, trained_at`;

const samplesTable = (sources: string, statuses: string, stepColumns: boolean) => `
    CREATE TABLE samples_next (
      id               INTEGER PRIMARY KEY AUTOINCREMENT,
      turn_id          TEXT NOT NULL UNIQUE REFERENCES turns(id) ON DELETE CASCADE,
      source           TEXT NOT NULL CHECK (source IN (${sources})),
      policy_version   INTEGER NOT NULL,
      score            INTEGER NOT NULL CHECK (score IN (-1, 0, 1)),
      rl_advantage     REAL NOT NULL,
      opd_weight       REAL NOT NULL,
      teacher_logprobs BLOB,
      teacher_version  INTEGER,
      status           TEXT NOT NULL CHECK (status IN (${statuses})),
      created_at       INTEGER NOT NULL,
      trained_step     INTEGER,
      trained_at       INTEGER,${
        stepColumns
          ? `
      reward           REAL,
      step_index       INTEGER CHECK (step_index IS NULL OR step_index >= 0),`
          : ''
      }
      CHECK ((status = 'trained') = (trained_step IS NOT NULL)),
      CHECK ((teacher_logprobs IS NULL) = (teacher_version IS NULL))
    ) STRICT;
    INSERT INTO samples_next (${SAMPLE_COLUMNS}) SELECT ${SAMPLE_COLUMNS} FROM samples;
    -- Keep the id counter: ids of deleted samples are never handed out again.
    DELETE FROM sqlite_sequence WHERE name = 'samples_next';
    INSERT INTO sqlite_sequence (name, seq) SELECT 'samples_next', seq FROM sqlite_sequence WHERE name = 'samples';
    DROP TABLE samples;
    ALTER TABLE samples_next RENAME TO samples;
    CREATE INDEX samples_by_status ON samples (status, id);
`;

const OLD_SOURCES = `'rl', 'opd', 'opd+rl', 'rl-zero'`;
const OLD_STATUSES = `'queued', 'trained', 'stale', 'too_long'`;

export const migration007: Migration = {
  version: 7,
  name: 'feedback-steps',
  rebuildsTables: true,
  up: `
    INSERT INTO closure_reasons (reason, description) VALUES
      ('episode_end', 'the client sent the session''s outcome (POST /v1/feedback): the episode is over');

    ALTER TABLE sessions ADD COLUMN task_id TEXT;
    ALTER TABLE sessions ADD COLUMN rollout_index INTEGER;
    ALTER TABLE sessions ADD COLUMN rollout_count INTEGER;
    CREATE INDEX sessions_by_task ON sessions (task_id) WHERE task_id IS NOT NULL;

    CREATE TABLE feedback (
      id              TEXT PRIMARY KEY,
      idempotency_key TEXT NOT NULL UNIQUE,
      session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      turn_id         TEXT REFERENCES turns(id) ON DELETE CASCADE,
      reward          REAL NOT NULL CHECK (reward >= -1 AND reward <= 1),
      comment         TEXT,
      created_at      INTEGER NOT NULL
    ) STRICT;
    -- One outcome per session, one reward per turn.
    CREATE UNIQUE INDEX feedback_outcome ON feedback (session_id) WHERE turn_id IS NULL;
    CREATE UNIQUE INDEX feedback_turn ON feedback (turn_id) WHERE turn_id IS NOT NULL;

    ${samplesTable(`${OLD_SOURCES}, 'steps', 'steps+opd'`, `${OLD_STATUSES}, 'waiting'`, true)}
  `,
  // Samples of the steps method have no place in schema 6: they are deleted, and episode ends read
  // as the closure that comes nearest (no next state).
  down: `
    DELETE FROM samples WHERE source IN ('steps', 'steps+opd');
    ${samplesTable(OLD_SOURCES, OLD_STATUSES, false)}
    DROP TABLE feedback;
    DROP INDEX sessions_by_task;
    ALTER TABLE sessions DROP COLUMN rollout_count;
    ALTER TABLE sessions DROP COLUMN rollout_index;
    ALTER TABLE sessions DROP COLUMN task_id;
    UPDATE turns SET closure_reason = 'no_next_state' WHERE closure_reason = 'episode_end';
    DELETE FROM closure_reasons WHERE reason = 'episode_end';
  `,
};
