// Schema 2: what the learning loop adds. The judge's verdict on each closed turn with every vote's
// raw text, the training samples built from them (durable, tagged with the policy version that
// sampled them, each trained at most once), and one row per optimizer step.

import type { Migration } from './index.js';

export const migration002: Migration = {
  version: 2,
  name: 'learning',
  up: `
    CREATE TABLE judgments (
      turn_id         TEXT PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
      next_turn_id    TEXT,
      judge           TEXT NOT NULL,
      skipped         TEXT,
      score           INTEGER NOT NULL CHECK (score IN (-1, 0, 1)),
      agreement       REAL,
      hint            TEXT,
      hint_vote       INTEGER,
      hint_rejections TEXT NOT NULL,
      started_at      INTEGER NOT NULL,
      finished_at     INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE judge_votes (
      turn_id  TEXT NOT NULL REFERENCES judgments(turn_id) ON DELETE CASCADE,
      kind     TEXT NOT NULL CHECK (kind IN ('eval', 'hint')),
      idx      INTEGER NOT NULL,
      score    INTEGER CHECK (score IS NULL OR score IN (-1, 0, 1)),
      hint     TEXT,
      raw      TEXT NOT NULL,
      failure  TEXT,
      detail   TEXT,
      attempts INTEGER NOT NULL,
      ms       INTEGER NOT NULL,
      PRIMARY KEY (turn_id, kind, idx)
    ) STRICT;

    CREATE TABLE samples (
      id               INTEGER PRIMARY KEY AUTOINCREMENT,
      turn_id          TEXT NOT NULL UNIQUE REFERENCES turns(id) ON DELETE CASCADE,
      source           TEXT NOT NULL CHECK (source IN ('rl', 'opd', 'opd+rl', 'rl-zero')),
      policy_version   INTEGER NOT NULL,
      score            INTEGER NOT NULL CHECK (score IN (-1, 0, 1)),
      rl_advantage     REAL NOT NULL,
      opd_weight       REAL NOT NULL,
      teacher_logprobs BLOB,
      teacher_version  INTEGER,
      status           TEXT NOT NULL CHECK (status IN ('queued', 'trained', 'stale')),
      created_at       INTEGER NOT NULL,
      trained_step     INTEGER,
      trained_at       INTEGER,
      CHECK ((status = 'trained') = (trained_step IS NOT NULL)),
      CHECK ((teacher_logprobs IS NULL) = (teacher_version IS NULL))
    ) STRICT;
    CREATE INDEX samples_by_status ON samples (status, id);

    CREATE TABLE train_steps (
      step             INTEGER PRIMARY KEY,
      batch            INTEGER NOT NULL,
      version          INTEGER NOT NULL,
      samples          INTEGER NOT NULL,
      tokens           INTEGER NOT NULL,
      loss             REAL NOT NULL,
      grad_norm        REAL NOT NULL,
      applied          INTEGER NOT NULL,
      lr               REAL NOT NULL,
      clip_fraction    REAL NOT NULL,
      approx_kl        REAL NOT NULL,
      entropy          REAL NOT NULL,
      tis_mean         REAL NOT NULL,
      rollout_abs_diff REAL NOT NULL,
      reward_mean      REAL NOT NULL,
      hints            INTEGER NOT NULL,
      stale_dropped    INTEGER NOT NULL,
      seconds          REAL NOT NULL,
      yielded_ms       REAL NOT NULL,
      tokens_per_second REAL NOT NULL,
      created_at       INTEGER NOT NULL
    ) STRICT;
  `,
  down: `
    DROP TABLE train_steps;
    DROP TABLE samples;
    DROP TABLE judge_votes;
    DROP TABLE judgments;
  `,
};
