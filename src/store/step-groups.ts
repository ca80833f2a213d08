// What the `steps` method reads and writes: the state of every rollout that has samples waiting
// for their task group (and of the other rollouts of those tasks), the waiting steps of a group with
// their step index, outcome and PRM votes, and the release of a group's samples to the training
// queue with their rewards and advantages (one transaction). The decisions and the math are in
// learn/steps.ts.

import type { RolloutState } from '../types.js';
import { stmt, type SqliteDatabase } from './sqlite.js';

/** A judged step whose sample waits for its group. */
export interface WaitingStep {
  sampleId: number;
  sessionId: string;
  /** 0-based order among the session's main turns, superseded and cancelled ones left out (never steps). */
  stepIndex: number;
  /** The session's outcome. */
  outcome: number;
  /** The valid PRM votes (-1, 0, +1) on the step's next state; none when it had no next state. */
  votes: number[];
}

export interface StepRelease {
  sampleId: number;
  reward: number;
  stepIndex: number;
  /** The sample's advantage on every completion token (rl_advantage). */
  rlAdvantage: number;
}

const ROLLOUT_STATES = `
  WITH waiting AS (
    SELECT DISTINCT t.session_id AS id FROM samples s JOIN turns t ON t.id = s.turn_id WHERE s.status = 'waiting'
  ), members AS (
    SELECT id FROM waiting
    UNION
    SELECT o.id FROM sessions o WHERE o.task_id IN (
      SELECT task_id FROM sessions WHERE task_id IS NOT NULL AND id IN (SELECT id FROM waiting))
  )
  SELECT ses.id, ses.task_id, ses.rollout_count,
    EXISTS (SELECT 1 FROM feedback f WHERE f.session_id = ses.id AND f.turn_id IS NULL) AS has_outcome,
    (SELECT count(*) FROM turns t LEFT JOIN closed_turns c ON c.turn_id = t.id
      WHERE t.session_id = ses.id AND t.kind = 'main'
      AND (t.closure_reason IS NULL OR c.status IN ('pending', 'claimed'))) AS unsettled,
    (SELECT count(*) FROM samples s JOIN turns t ON t.id = s.turn_id
      WHERE t.session_id = ses.id AND s.status = 'waiting') AS waiting
  FROM sessions ses WHERE ses.id IN (SELECT id FROM members)
  ORDER BY ses.created_at, ses.id`;

const WAITING_STEPS = `
  WITH steps AS (
    SELECT t.id, t.session_id,
      row_number() OVER (PARTITION BY t.session_id ORDER BY t.received_at, t.rowid) - 1 AS step_index
    FROM turns t
    WHERE t.session_id IN (SELECT value FROM json_each(?)) AND t.kind = 'main'
      AND coalesce(t.closure_reason, '') NOT IN ('superseded', 'cancelled')
  )
  SELECT s.id AS sample_id, st.session_id, st.step_index, f.reward AS outcome,
    (SELECT json_group_array(v.score) FROM judge_votes v
      WHERE v.turn_id = s.turn_id AND v.kind = 'eval' AND v.score IS NOT NULL) AS votes
  FROM samples s JOIN steps st ON st.id = s.turn_id
    JOIN feedback f ON f.session_id = st.session_id AND f.turn_id IS NULL
  WHERE s.status = 'waiting'
  ORDER BY st.session_id, st.step_index`;

export class StepGroups {
  private readonly releaseTx: (steps: readonly StepRelease[]) => void;

  constructor(private readonly db: SqliteDatabase) {
    this.releaseTx = db.transaction((steps: readonly StepRelease[]) => {
      const update = stmt(
        this.db,
        `UPDATE samples SET status = 'queued', reward = ?, step_index = ?, rl_advantage = ?
        WHERE id = ? AND status = 'waiting'`,
      );
      for (const s of steps) {
        if (update.run(s.reward, s.stepIndex, s.rlAdvantage, s.sampleId).changes !== 1)
          throw new Error(`sample ${s.sampleId} is not waiting for its group (released or deleted meanwhile)`);
      }
    });
  }

  /** Every rollout with waiting samples, and every other rollout of their tasks. */
  rolloutStates(): RolloutState[] {
    const rows = stmt(this.db, ROLLOUT_STATES).all() as {
      id: string;
      task_id: string | null;
      rollout_count: number | null;
      has_outcome: number;
      unsettled: number;
      waiting: number;
    }[];
    return rows.map((r) => ({
      sessionId: r.id,
      taskId: r.task_id,
      count: r.rollout_count,
      hasOutcome: r.has_outcome === 1,
      unsettledTurns: r.unsettled,
      waitingSamples: r.waiting,
    }));
  }

  /** The waiting steps of these sessions (those with an outcome), by session and step index. */
  waitingSteps(sessionIds: readonly string[]): WaitingStep[] {
    const rows = stmt(this.db, WAITING_STEPS).all(JSON.stringify(sessionIds)) as {
      sample_id: number;
      session_id: string;
      step_index: number;
      outcome: number;
      votes: string;
    }[];
    return rows.map((r) => ({
      sampleId: r.sample_id,
      sessionId: r.session_id,
      stepIndex: r.step_index,
      outcome: r.outcome,
      votes: JSON.parse(r.votes) as number[],
    }));
  }

  /** Moves a group's samples to the training queue with their rewards and advantages, all or none. */
  release(steps: readonly StepRelease[]): void {
    this.releaseTx(steps);
  }
}
