// serve's retention rule: --retention-days D (or "retentionDays" in the config file) starts the
// purger on the store serve opened; without it nothing is purged.

import type { Logger } from '../gateway/log.js';
import { RetentionPurger } from '../store/retention.js';
import type { Store } from '../store/store.js';

export function startRetention(store: Store, days: number | null, logger: Logger): RetentionPurger | null {
  if (days === null) return null;
  return RetentionPurger.start(store, { days, log: (event, fields) => logger.event(event, fields) });
}
