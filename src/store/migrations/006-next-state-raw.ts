// Schema 6: next_states.raw_messages. A next state's `messages` are what the judge and the learner
// read: the user's own words, with OpenClaw's retry wrapper ("[Queued user message ...]",
// "Continue the current task ...") taken off a resent message. `raw_messages` keeps the messages
// exactly as received when they differ; NULL means `messages` are as received, as they were in
// every row written before this schema.

import type { Migration } from './index.js';

export const migration006: Migration = {
  version: 6,
  name: 'next-state-raw',
  up: `
    ALTER TABLE next_states ADD COLUMN raw_messages TEXT;
  `,
  down: `
    ALTER TABLE next_states DROP COLUMN raw_messages;
  `,
};
