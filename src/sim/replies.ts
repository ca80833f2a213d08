// The assistant's replies in the pre-training corpus, one writer per style. Each style opens in a
// way of its own, so the policy commits to a style in its first few tokens and a learning signal
// on those tokens moves the whole reply. Exactly one homework style (natural) and one grading
// style (warm) are what the simulated users want; the rest are the usual assistant habits.

import type { Problem } from './problems.js';
import { pick, type Rng } from './random.js';
import { workFor, type Step, type Work } from './work.js';

export const HOMEWORK_STYLES = ['markdown', 'numbered', 'marker', 'terse', 'natural'] as const;
export type HomeworkStyle = (typeof HOMEWORK_STYLES)[number];

export const GRADING_STYLES = ['terse', 'report', 'cold', 'warm'] as const;
export type GradingStyle = (typeof GRADING_STYLES)[number];

const EQUATION = (s: Step) => `${s.a} ${s.op} ${s.b} = ${s.result}`;

/** How a person says a step out loud, as a verb phrase ("you ..."). */
function spoken(s: Step, r: Rng): string {
  switch (s.op) {
    case '+':
      return pick(r, [
        `add ${s.a} and ${s.b}, which gives ${s.result}`,
        `put ${s.a} and ${s.b} together to get ${s.result}`,
      ]);
    case '-':
      return pick(r, [
        `take ${s.b} away from ${s.a} and get ${s.result}`,
        `subtract ${s.b} from ${s.a}, which leaves ${s.result}`,
      ]);
    case 'x':
      return pick(r, [
        `multiply ${s.a} by ${s.b} to get ${s.result}`,
        `work out ${s.a} times ${s.b}, which is ${s.result}`,
      ]);
    case '/':
      return pick(r, [
        `divide ${s.a} by ${s.b} to get ${s.result}`,
        `split ${s.a} into ${s.b} equal parts of ${s.result}`,
      ]);
  }
}

const LINKS = ['Then', 'After that', 'Next', 'Now'];

export function homeworkReply(style: HomeworkStyle, work: Work, r: Rng): string {
  const { steps, answer } = work;
  switch (style) {
    case 'markdown':
      return [
        ...steps.map((s, i) => `**Step ${i + 1}:** ${pick(r, ['Compute', 'Work out', 'Find'])} ${EQUATION(s)}.`),
        '',
        `**Final answer:** ${answer}`,
      ].join('\n');
    case 'numbered':
      return [
        pick(r, [
          "Sure! Let's solve this step by step.",
          "Sure! Here's the solution:",
          "Of course! Let's break it down:",
        ]),
        ...steps.map((s, i) => `${i + 1}. ${EQUATION(s)}`),
        pick(r, [
          `So the answer is ${answer}. I hope this helps!`,
          `The answer is ${answer}. Let me know if you have questions!`,
        ]),
      ].join('\n');
    case 'marker':
      return `${steps.map((s, i) => `${i === 0 ? 'First' : pick(r, LINKS)}, ${EQUATION(s)}.`).join(' ')}\n\n${pick(r, ['Final answer', 'Final Answer', 'Answer'])}: ${answer}`;
    case 'terse':
      return pick(r, [`The answer is ${answer}.`, `It's ${answer}.`, `${answer}.`]);
    case 'natural': {
      const first = `${pick(r, ['So first you', 'Okay so you', 'You start by saying you'])} ${spoken(steps[0]!, r)}.`;
      const rest = steps.slice(1).map((s) => `${pick(r, LINKS)} you ${spoken(s, r)}.`);
      return [first, ...rest, pick(r, [`That means the answer is ${answer}.`, `So it comes out to ${answer}.`])].join(
        ' ',
      );
    }
  }
}

/** What the student handed in for the grading task: right, or off in the last step. */
export interface Submission {
  text: string;
  correct: boolean;
  /** The number the student ended with. */
  given: string;
}

export function submissionFor(problem: Problem, r: Rng): { work: Work; submission: Submission } {
  const work = workFor(problem, r);
  const correct = r.next() < 0.6;
  const given = correct ? work.answer : String(Number(work.answer) + pick(r, [-10, -2, -1, 1, 2, 5, 10]));
  const lines = work.steps.map((s, i) =>
    i === work.steps.length - 1 ? `${s.a} ${s.op} ${s.b} = ${given}` : EQUATION(s),
  );
  return { work, submission: { text: `${lines.join(', ')}. Answer: ${given}`, correct, given } };
}

export function gradingReply(style: GradingStyle, work: Work, sub: Submission, r: Rng): string {
  const first = work.steps[0]!;
  const last = work.steps[work.steps.length - 1]!;
  switch (style) {
    case 'terse':
      return sub.correct
        ? pick(r, ['Correct.', `Correct, ${sub.given}.`, 'Right answer.'])
        : pick(r, [`Wrong. The answer is ${work.answer}.`, `Incorrect, should be ${work.answer}.`]);
    case 'report':
      return [
        `**Score:** ${sub.correct ? 10 : pick(r, [4, 5, 6])}/10`,
        `**Comments:** ${sub.correct ? 'Correct answer and method.' : `Final answer incorrect; expected ${work.answer}.`}`,
      ].join('\n');
    case 'cold':
      return sub.correct
        ? `The student computed ${EQUATION(first)}. The method is set up correctly and each step follows from the one before. The last step ${EQUATION(last)} is correct. The final answer ${sub.given} is correct.`
        : `The student computed ${EQUATION(first)}. The method is set up correctly but the arithmetic at the end is off. The last step is wrong: ${last.a} ${last.op} ${last.b} is ${work.answer}, not ${sub.given}. The final answer is incorrect.`;
    case 'warm':
      return sub.correct
        ? `${pick(r, ['Nice work on this one!', 'Great job here!', 'Well done!'])} You started the right way when you ${spoken(first, r)}. Then you finished with ${EQUATION(last)}, and that is the correct answer. ${pick(r, ['I like how you showed every step, keep it up!', 'Your work is clear and easy to follow, keep it up!'])}`
        : `${pick(r, ['Good start here!', 'Nice effort on this one!', 'You are on the right track!'])} You started the right way when you ${spoken(first, r)}. In the last step ${last.a} ${last.op} ${last.b} comes out to ${work.answer}, not ${sub.given}, so check that part again. ${pick(r, ["You're really close, keep going!", "Don't worry, you've got this!"])}`;
  }
}

/** Replies to the user's acceptance and save requests. */
export function savedReply(file: string, r: Rng): string {
  return pick(r, [
    `Done! I added it to the end of ${file}.`,
    `Saved. It's now at the end of ${file}.`,
    `All set, I appended it to ${file}.`,
  ]);
}

export function thanksReply(r: Rng): string {
  return pick(r, [
    'Glad it helps! Tell me when you want it saved.',
    "You're welcome! Want me to save it to the file?",
    'Happy to help! I can save it whenever you like.',
  ]);
}
