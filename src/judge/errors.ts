// The one error type judge clients throw. It carries the vote failure it maps to and whether
// trying again may help, so judgeTurn's retry policy does not parse messages.

import type { VoteFailure } from './types.js';

export type ClientFailure = Exclude<VoteFailure, 'unparseable'>;

export class JudgeClientError extends Error {
  constructor(
    readonly failure: ClientFailure,
    message: string,
    /** Timeouts, lost connections, 5xx, 408 and 429 may pass; a bad key or a wrong model will not. */
    readonly transient: boolean,
    /** The HTTP status, when there was one. */
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = 'JudgeClientError';
  }
}

/** Whether an HTTP status is worth retrying. */
export function transientStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}
