// Schema 8: what retention and deletion need. `batch_holds` lists the samples a training batch in
// progress holds, with the holding process's id: they stay until the batch's step rows commit, and
// their foreign key (no ON DELETE action) makes deleting a held sample fail in SQLite itself, so no
// purge or deletion, from this process or another (`openclaw-rl data delete`), can take a sample
// from under the trainer. `turns_by_completed` lets the retention purge find old turns without a scan.

import type { Migration } from './index.js';

export const migration008: Migration = {
  version: 8,
  name: 'retention',
  up: `
    CREATE TABLE batch_holds (
      sample_id  INTEGER PRIMARY KEY REFERENCES samples(id),
      holder_pid INTEGER NOT NULL,
      held_at    INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX turns_by_completed ON turns (completed_at);
  `,
  down: `
    DROP INDEX turns_by_completed;
    DROP TABLE batch_holds;
  `,
};
