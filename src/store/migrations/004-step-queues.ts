// Schema 4: each training step records the queues it left behind (samples still queued, closed
// turns not judged yet), so a step's row says whether training keeps up with the traffic. Rows of
// steps trained before this schema have NULL there.

import type { Migration } from './index.js';

export const migration004: Migration = {
  version: 4,
  name: 'step-queues',
  up: `
    ALTER TABLE train_steps ADD COLUMN samples_queued INTEGER;
    ALTER TABLE train_steps ADD COLUMN turns_waiting INTEGER;
  `,
  down: `
    ALTER TABLE train_steps DROP COLUMN turns_waiting;
    ALTER TABLE train_steps DROP COLUMN samples_queued;
  `,
};
