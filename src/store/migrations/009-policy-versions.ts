// Schema 9: the record of every published policy version (what it was published from and where
// its weights live, for `versions list` and rollback) and the rollback requests that `versions
// rollback`, the admin route and the guard make, which the running trainer (or the next start)
// applies. A version row is written in the transaction that commits its batch.

import type { Migration } from './index.js';

export const migration009: Migration = {
  version: 9,
  name: 'policy-versions',
  up: `
    CREATE TABLE policy_versions (
      version          INTEGER PRIMARY KEY CHECK (version > 0),
      published_at     INTEGER NOT NULL,
      step             INTEGER NOT NULL,
      source           TEXT NOT NULL CHECK (source IN ('train', 'rollback', 'restart')),
      rolled_back_from INTEGER,
      restores         INTEGER,
      requested_by     TEXT CHECK (requested_by IS NULL OR requested_by IN ('cli', 'admin', 'guard')),
      weights_path     TEXT,
      guard            TEXT,
      CHECK ((source = 'rollback') = (restores IS NOT NULL)),
      CHECK ((source = 'rollback') = (rolled_back_from IS NOT NULL)),
      CHECK ((source = 'rollback') = (requested_by IS NOT NULL))
    ) STRICT;

    CREATE TABLE rollback_requests (
      id                INTEGER PRIMARY KEY AUTOINCREMENT,
      target            INTEGER NOT NULL CHECK (target >= 0),
      requested_by      TEXT NOT NULL CHECK (requested_by IN ('cli', 'admin', 'guard')),
      requested_at      INTEGER NOT NULL,
      status            TEXT NOT NULL CHECK (status IN ('pending', 'done', 'refused')),
      published_version INTEGER,
      message           TEXT,
      finished_at       INTEGER,
      CHECK ((status = 'done') = (published_version IS NOT NULL)),
      CHECK ((status = 'pending') = (finished_at IS NULL))
    ) STRICT;
    CREATE INDEX rollback_requests_pending ON rollback_requests (status, id);
  `,
  down: `
    DROP TABLE rollback_requests;
    DROP TABLE policy_versions;
  `,
};
