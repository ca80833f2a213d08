// `sim demo`: one learning run shown live. The simulated users' conversations scroll by with the
// rubric's verdict on each reply, the judge's votes and the trainer's steps appear as they happen,
// the bottom line shows the batch filling up, and the personalization score is measured at step 0
// and every few steps, so a newcomer watches the agent learn the users' style.

import type { AdminStatus } from './client.js';
import type { ConversationEvent } from './conversation.js';
import { runExperiment, type ExperimentOptions, type ScorePoint } from './experiment.js';
import type { LogLine } from './serve-process.js';
import { bar, Console, paint } from './terminal.js';

export async function runDemo(o: ExperimentOptions): Promise<number> {
  const ui = new Console(process.stdout);
  const c = paint(process.stdout);
  const points: ScorePoint[] = [];
  let status: AdminStatus | null = null;
  const flat = (s: string, n: number) => {
    const one = s.replace(/\s*\n\s*/g, ' ⏎ ');
    return one.length > n ? `${one.slice(0, n - 1)}…` : one;
  };
  const who = (e: ConversationEvent) => `[${e.user} ${e.sessionId.split('-').pop()}]`.padEnd(13);
  let lastHint = '';
  const history = () => points.map((p) => `${p.step}: ${c.bold(p.score.toFixed(2))}`).join(' → ');
  const statusLine = () => {
    if (!status) return;
    const q = status.queues?.samples ?? 0;
    ui.setStatus(
      `${c.cyan('step')} ${status.steps}/${o.steps} ${bar(status.steps / o.steps, 16)}  ${c.cyan('batch')} ${bar(q / o.batchSize, 16)} ${q}/${o.batchSize} samples  ${c.cyan('judged')} ${status.judge?.judged ?? 0}  ${c.cyan('score')} ${history()}`,
    );
  };

  ui.line(
    c.bold(`openclaw-rl sim demo: a simulated student and teacher teach the agent their style (method ${o.method})`),
  );
  ui.line(
    c.dim(
      `The student wants homework help that does not look AI-written (no bold, lists or "Final answer"), with every step.`,
    ),
  );
  ui.line(
    c.dim(
      `The teacher wants warm, detailed grading comments. Both talk to \`openclaw-rl serve\` over HTTP; a simulated judge`,
    ),
  );
  ui.line(
    c.dim(
      `(${Math.round(o.judgeErrorRate * 100)}% wrong votes, ${o.judgeVotes} per turn) reads their replies, and the policy trains every ${o.batchSize} samples.`,
    ),
  );
  ui.line('');
  await runExperiment({
    ...o,
    onConversation: (e) => {
      if (e.role === 'user') ui.line(`${who(e)} ${c.blue(e.user.padEnd(7))} › ${flat(e.text, 96)}`);
      else {
        const mark = e.verdict
          ? e.verdict.accepted
            ? c.green(' ✓ as they like it')
            : c.red(` ✗ ${e.verdict.violations.join(', ')}`)
          : '';
        ui.line(`${who(e)} ${c.magenta('agent'.padEnd(7))} › ${flat(e.text, 96)}${mark}`);
      }
    },
    onVote: (v) => {
      if (v.hint === null || v.hint === lastHint) return;
      lastHint = v.hint;
      ui.line(
        c.dim(
          `${'judge'.padEnd(21)} · hint: ${flat(v.hint, 100)}${v.wrong ? ' (a judge error: nothing asked for this)' : ''}`,
        ),
      );
    },
    onServeLog: (line: LogLine) => {
      if (line.event === 'turn_judged' && !line.skipped) {
        const votes = (line.votes as (number | null)[])
          .map((v) => (v === null ? '?' : v > 0 ? `+${v}` : String(v)))
          .join(' ');
        const score = Number(line.score);
        ui.line(
          c.dim(
            `${'judge'.padEnd(21)} · votes ${votes} → ${score > 0 ? '+1' : String(score)}${line.hint ? ', hint accepted' : ''}`,
          ),
        );
      } else if (line.event === 'batch_trained') {
        ui.line(
          c.yellow(
            `${'trainer'.padEnd(21)} · step ${line.step}: ${line.samples} samples, reward ${Number(line.rewardMean).toFixed(2)}, ${line.hints} with hints, ${Number(line.trainSeconds).toFixed(1)} s → serving version ${line.version}`,
          ),
        );
      }
    },
    onStatus: (s) => {
      status = s;
      statusLine();
    },
    onProbe: (done, total) =>
      ui.setStatus(
        `${c.cyan('measuring the personalization score')} ${bar(done / total, 24)} ${done}/${total} held-out replies`,
      ),
    onPoint: (p) => {
      points.push(p);
      ui.line(
        c.bold(
          c.green(
            `score at step ${p.step}: ${p.score.toFixed(2)}  (student ${p.byUser.student.toFixed(2)}, teacher ${p.byUser.teacher.toFixed(2)})   history ${history()}`,
          ),
        ),
      );
      ui.line(c.dim(`  e.g. student probe: ${flat(p.examples.student, 110)}`));
    },
  });
  ui.endStatus();
  ui.line(c.bold(`personalization score by step: ${history()}`));
  return 0;
}
