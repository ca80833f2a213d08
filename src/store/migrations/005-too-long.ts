// Schema 5: training samples longer than the learner's bound (--max-train-tokens) are never
// trained, and the store says so. A judged turn too long to train records why it has no sample
// (`judgments.no_sample`); a queued sample that exceeds a bound lowered since it was made leaves
// the queue as `too_long`. `samples.status` has a CHECK, which ALTER cannot change, so the table
// is rebuilt (create, copy with ids and the id counter, drop, rename); nothing references `samples`.

import type { Migration } from './index.js';

const SAMPLE_COLUMNS = `id, turn_id, source, policy_version, score, rl_advantage, opd_weight, teacher_logprobs, teacher_version,
  status, created_at, trained_step, trained_at`;

const samplesTable = (statuses: string) => `
    CREATE TABLE samples_next (
      id               INTEGER PRIMARY KEY AUTOINCREMENT,
      turn_id          TEXT NOT NULL UNIQUE REFERENCES turns(id) ON DELETE CASCADE,
      source           TEXT NOT NULL CHECK (source IN ('rl', 'opd', 'opd+rl', 'rl-zero')),
      policy_version   INTEGER NOT NULL,
      score            INTEGER NOT NULL CHECK (score IN (-1, 0, 1)),
      rl_advantage     REAL NOT NULL,
      opd_weight       REAL NOT NULL,
      teacher_logprobs BLOB,
      teacher_version  INTEGER,
      status           TEXT NOT NULL CHECK (status IN (${statuses})),
      created_at       INTEGER NOT NULL,
      trained_step     INTEGER,
      trained_at       INTEGER,
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

export const migration005: Migration = {
  version: 5,
  name: 'too-long',
  rebuildsTables: true,
  up: `
    ALTER TABLE judgments ADD COLUMN no_sample TEXT;
    ${samplesTable(`'queued', 'trained', 'stale', 'too_long'`)}
  `,
  down: `
    UPDATE samples SET status = 'stale' WHERE status = 'too_long';
    ${samplesTable(`'queued', 'trained', 'stale'`)}
    ALTER TABLE judgments DROP COLUMN no_sample;
  `,
};
