// The simulated users: who they are (opener, hidden rubric) and what they say next. Their
// messages are natural language with variation: a correction names what to change ("too robotic,
// drop the bold and the list"), an acceptance may ask to save right away or only say thanks, and
// a save request follows. The same phrase banks write the pre-training corpus, so the base
// policy has seen such feedback, as a real instruction-tuned model would have.

import type { Problem } from './problems.js';
import { pick, type Rng } from './random.js';
import { submissionFor, type Submission } from './replies.js';
import { STUDENT_RUBRIC, TEACHER_RUBRIC, type Rubric, type Violation } from './rubrics.js';
import type { Work } from './work.js';

export type UserName = 'student' | 'teacher';
export const USER_NAMES: readonly UserName[] = ['student', 'teacher'];

/** What the user's first message is about; the grading task also carries the submission. */
export interface Task {
  user: UserName;
  problem: Problem;
  file: string;
  opener: string;
  /** Grading only: the steps and what the student handed in. */
  grading?: { work: Work; submission: Submission };
}

export interface SimUser {
  name: UserName;
  rubric: Rubric;
  task(problem: Problem, r: Rng): Task;
  correction(violations: readonly Violation[], r: Rng): string;
  /** Satisfied: asks to save, or (saveNow false) only says so. */
  acceptance(task: Task, saveNow: boolean, r: Rng): string;
  saveRequest(task: Task, r: Rng): string;
}

const STUDENT_DIRECTIONS: Record<string, readonly string[]> = {
  bold: ['drop the bold', 'no bold stuff', 'get rid of the bold text'],
  list: ['no numbered list', "don't number the steps", 'write it in sentences not a list'],
  heading: ['no headings'],
  marker: ["don't put 'Final answer' at the end", "lose the 'Answer:' label at the end", 'no final answer line'],
  chatbot: ["don't say stuff like 'Sure!' or 'I hope this helps'", 'skip the chatbot phrases'],
  no_steps: ['you skipped the steps, show how you got it', 'i need every step shown, not just the answer'],
};

const TEACHER_DIRECTIONS: Record<string, readonly string[]> = {
  formatted: [
    'no score boxes or labels, just write comments',
    'drop the formatting and write it like notes on the paper',
  ],
  short: ['these are way too short, say what they did well and what went wrong', 'add more detail about their steps'],
  cold: ['it sounds cold, talk to the kid directly and be encouraging', 'make it warmer and more encouraging'],
};

function directions(bank: Record<string, readonly string[]>, violations: readonly Violation[], r: Rng): string {
  const parts = violations.filter((v) => bank[v]).map((v) => pick(r, bank[v]!));
  if (parts.length <= 1) return parts.join('');
  return `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}

export const STUDENT: SimUser = {
  name: 'student',
  rubric: STUDENT_RUBRIC,
  task(problem, r) {
    const file = `homework/${problem.index}.txt`;
    const opener = `${pick(r, ['hey can you help me with my homework?', 'can u help me solve this?', 'i need help with this problem.'])} ${problem.question} ${pick(r, ["show me the answer first, don't save anything yet.", 'just show me first, dont write to the file yet.'])}`;
    return { user: 'student', problem, file, opener };
  },
  correction(violations, r) {
    const looksAi = violations.some((v) => v !== 'no_steps');
    const complaint = looksAi
      ? pick(r, [
          'ugh this looks so AI written lol.',
          'nah my teacher will know a bot wrote this.',
          'too robotic.',
          "hmm this doesn't sound like me.",
          'this reads like a chatbot wrote it.',
        ])
      : pick(r, ["hmm, where's the work?", "that won't pass."]);
    const tail = looksAi
      ? pick(r, [
          ' just write it like a normal person would.',
          ' make it sound like me.',
          ' but keep all the steps.',
          '',
        ])
      : '';
    return `${complaint} ${directions(STUDENT_DIRECTIONS, violations, r)}.${tail}`;
  },
  acceptance(task, saveNow, r) {
    if (!saveNow) return pick(r, ['perfect, thanks!', "thanks, that's great", 'cool thanks']);
    return `${pick(r, ['nice, that sounds like me.', "ok perfect, that looks like something i'd write.", "yes that's good."])} ${this.saveRequest(task, r)}`;
  },
  saveRequest(task, r) {
    return pick(r, [
      `can you add it to the end of ${task.file} now?`,
      `now append it to ${task.file} please.`,
      `save it to the end of ${task.file}.`,
    ]);
  },
};

export const TEACHER: SimUser = {
  name: 'teacher',
  rubric: TEACHER_RUBRIC,
  task(problem, r) {
    const file = `homework/${problem.index}.txt`;
    const grading = submissionFor(problem, r);
    const opener = `${pick(r, ["I'm grading a submission.", 'Please help me grade this homework.'])} Question: ${problem.question} Correct answer: ${problem.answer}. The student wrote: ${grading.submission.text} ${pick(r, ['Write the grading comments as if on the paper. Show me first, do not write them yet.', 'Give me the comments to write on the paper, but show me before saving.'])}`;
    return { user: 'teacher', problem, file, opener, grading };
  },
  correction(violations, r) {
    return `${pick(r, ['Hmm,', 'Eh,', 'Not quite,', 'Ok but'])} ${directions(TEACHER_DIRECTIONS, violations, r)}.`;
  },
  acceptance(task, saveNow, r) {
    if (!saveNow) return pick(r, ['Lovely, thank you!', 'That is great, thanks.']);
    return `${pick(r, ["Great, that's exactly the tone I want.", "Lovely, that's perfect."])} ${this.saveRequest(task, r)}`;
  },
  saveRequest(task, r) {
    return pick(r, [`Please append the comments to ${task.file}.`, `Now add them to the end of ${task.file}.`]);
  },
};

export const USERS: Record<UserName, SimUser> = { student: STUDENT, teacher: TEACHER };
