// The judge's families, read at scrape time from the counters it already keeps (JudgeMetrics,
// through LearningStatus.judge) and its recent figures from the store: votes by outcome, turns by
// score and by agreement, hints accepted and rejected by reason, queue events, health.

import type { Registry } from 'prom-client';
import { HINT_REJECTION_REASONS, VOTE_FAILURES } from '../judge/types.js';
import type { LearningStatus } from '../learn/status.js';
import { scrapedCounter, scrapedGauge, type Reading } from './scraped.js';

type Judge = LearningStatus['judge'];

export function registerJudgeMetrics(registry: Registry, judge: () => Judge | null): void {
  /** A reading of counters named `judge/<prefix><value>`, one label set per value. */
  const counters =
    (label: string, prefix: string, values: readonly string[], labelOf = (v: string) => v) =>
    (): Reading => {
      const j = judge();
      if (!j) return null;
      return values.map((v) => ({ labels: { [label]: labelOf(v) }, value: j.counters[`judge/${prefix}${v}`] ?? 0 }));
    };
  const one = (name: string) => (): Reading => judge()?.counters[`judge/${name}`] ?? null;

  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_judge_votes_total',
      help: 'Judge votes by kind (eval: the score, hint: the hindsight hint) and outcome (ok or why it failed)',
      labelNames: ['kind', 'outcome'],
    },
    () => {
      const j = judge();
      if (!j) return null;
      return ['eval', 'hint'].flatMap((kind) =>
        ['ok', ...VOTE_FAILURES].map((outcome) => ({
          labels: { kind, outcome },
          value: j.counters[`judge/${kind}_votes/${outcome}`] ?? 0,
        })),
      );
    },
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_judge_turns_total',
      help: 'Turns judged (not skipped), by the majority score of their eval votes (0: a tie or no valid vote)',
      labelNames: ['score'],
    },
    counters('score', 'score/', ['+1', '-1', '0'], (v) => (v === '+1' ? '1' : v)),
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_judge_agreement_turns_total',
      help: 'Turns judged, by how their valid eval votes agreed: unanimous, split, or none (no valid vote)',
      labelNames: ['agreement'],
    },
    counters('agreement', 'agreement/', ['unanimous', 'split', 'none']),
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_judge_skipped_turns_total', help: 'Closed turns not judged: no next state to learn from' },
    one('skipped'),
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_judge_abstained_turns_total', help: 'Turns judged whose eval votes abstained (score 0)' },
    one('abstained'),
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_judge_retries_total', help: 'Judge requests retried after a transient failure' },
    one('retries'),
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_judge_queue_events_total',
      help: "The judge queue's events (offered, accepted, duplicate, full, persist_failed...)",
      labelNames: ['event'],
    },
    () => {
      const j = judge();
      if (!j) return null;
      return Object.entries(j.counters)
        .filter(([name]) => name.startsWith('judge/queue/'))
        .map(([name, value]) => ({ labels: { event: name.slice('judge/queue/'.length) }, value }));
    },
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_hints_accepted_total', help: 'Hindsight hints accepted (one at most per judged turn)' },
    one('hint/accepted'),
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_hints_rejected_total',
      help: 'Positive hint votes whose hint was not accepted, by reason',
      labelNames: ['reason'],
    },
    counters('reason', 'hint/rejected/', HINT_REJECTION_REASONS),
  );
  scrapedGauge(
    registry,
    { name: 'openclaw_rl_judge_failing', help: "1 while most of the judge's recent votes failed, else 0" },
    () => {
      const j = judge();
      return j ? Number(j.health.state === 'failing') : null;
    },
  );
  scrapedGauge(
    registry,
    {
      name: 'openclaw_rl_judge_recent_agreement_ratio',
      help: 'Mean share of valid eval votes agreeing with the majority, over the last 100 judged turns (NaN: none)',
    },
    () => judge()?.recent.agreementMean ?? null,
  );
  scrapedGauge(
    registry,
    {
      name: 'openclaw_rl_judge_recent_score_mean',
      help: 'Mean majority score (-1 to 1) over the last 100 judged turns (NaN: none)',
    },
    () => {
      const recent = judge()?.recent;
      return recent && recent.turns > 0 ? recent.scoreMean : null;
    },
  );
}
