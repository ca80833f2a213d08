// Judge counters for the operator: votes by failure reason, scores, abstentions, agreement and
// hint outcomes, plus the queue's own events. Names are grouped with slashes (judge/...).

import { RecentVotes, type JudgeHealth } from './health.js';
import { HINT_REJECTION_REASONS, VOTE_FAILURES, type JudgedTurn } from './types.js';
import { majority } from './vote.js';

export type QueueEvent =
  | 'offered'
  | 'accepted'
  | 'duplicate'
  | 'full'
  | 'closed'
  | 'dropped_on_close'
  | 'cancelled'
  | 'persist_failed'
  | 'failed';

export class JudgeMetrics {
  private readonly counts = new Map<string, number>();
  private agreementSum = 0;
  private agreementTurns = 0;
  private msSum = 0;
  private readonly recent = new RecentVotes();

  constructor() {
    // Every name exists from the start, so a dashboard shows 0 rather than nothing.
    for (const kind of ['eval_votes', 'hint_votes'])
      for (const f of ['ok', ...VOTE_FAILURES]) this.counts.set(`judge/${kind}/${f}`, 0);
    for (const r of HINT_REJECTION_REASONS) this.counts.set(`judge/hint/rejected/${r}`, 0);
    for (const name of [
      'turns',
      'skipped',
      'retries',
      'abstained',
      'score/+1',
      'score/-1',
      'score/0',
      'hint/accepted',
      'agreement/unanimous',
      'agreement/split',
      'agreement/none',
    ])
      this.counts.set(`judge/${name}`, 0);
  }

  add(name: string, n = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + n);
  }

  queue(event: QueueEvent): void {
    this.add(`judge/queue/${event}`);
  }

  recordJudged(j: JudgedTurn): void {
    this.add('judge/turns');
    this.msSum += j.finishedAt - j.startedAt;
    if (j.skipped) {
      this.add('judge/skipped');
      return;
    }
    for (const v of j.evalVotes) {
      this.add(`judge/eval_votes/${v.failure ?? 'ok'}`);
      this.add('judge/retries', v.attempts - 1);
    }
    for (const v of j.hintVotes) {
      this.add(`judge/hint_votes/${v.failure ?? 'ok'}`);
      this.add('judge/retries', v.attempts - 1);
    }
    for (const v of [...j.evalVotes, ...j.hintVotes]) this.recent.add(v.failure ?? 'ok');
    this.add(`judge/score/${j.score === 1 ? '+1' : j.score}`);
    if (majority(j.evalVotes.map((v) => v.score)).abstained) this.add('judge/abstained');
    if (j.agreement !== null) {
      this.agreementSum += j.agreement;
      this.agreementTurns += 1;
      this.add(j.agreement === 1 ? 'judge/agreement/unanimous' : 'judge/agreement/split');
    } else this.add('judge/agreement/none');
    if (j.hint !== null) this.add('judge/hint/accepted');
    for (const r of j.hintRejections) this.add(`judge/hint/rejected/${r.reason}`);
  }

  /** Whether most of the judge's recent votes failed (see health.ts). */
  health(): JudgeHealth {
    return this.recent.health();
  }

  /**
   * Counters, plus judge/agreement/mean over turns with a valid vote and judge/turn_ms/mean.
   * judge/turns counts skipped turns too; votes, scores and hints count judged turns only.
   */
  snapshot(): Record<string, number> {
    const out = Object.fromEntries(this.counts);
    const turns = this.counts.get('judge/turns') ?? 0;
    out['judge/agreement/mean'] = this.agreementTurns === 0 ? 0 : this.agreementSum / this.agreementTurns;
    out['judge/turn_ms/mean'] = turns === 0 ? 0 : this.msSum / turns;
    return out;
  }
}
