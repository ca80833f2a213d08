// The pre-training corpus of the sim base policy: homework-help and grading conversations over
// GSM8K training problems. A first reply samples the base style mix (mostly AI-like, a minority
// in each user's preferred style), so the base personalization score is low but not zero; after
// a correction or a hint the reply mostly switches to the preferred style, as an
// instruction-following model would; acceptance and save requests get short confirmations.

import type { ChatMessage } from '../chat/messages.js';
import { hintFor, VAGUE_HINTS, withHint } from './hints.js';
import type { Problem } from './problems.js';
import {
  gradingReply,
  homeworkReply,
  savedReply,
  thanksReply,
  type GradingStyle,
  type HomeworkStyle,
} from './replies.js';
import { pick, rng, weighted, type Rng } from './random.js';
import type { Violation } from './rubrics.js';
import { USERS, type Task, type UserName } from './users.js';
import { workFor, type Work } from './work.js';

/** First-reply styles of the base policy; the preferred ones (natural, warm) are a minority. */
export const HOMEWORK_MIX: Record<HomeworkStyle, number> = {
  markdown: 0.3,
  numbered: 0.27,
  marker: 0.21,
  terse: 0.07,
  natural: 0.15,
};
export const GRADING_MIX: Record<GradingStyle, number> = { terse: 0.28, report: 0.27, cold: 0.3, warm: 0.15 };

export interface CorpusOptions {
  seed: number;
  conversations: number;
  /** Share of conversations whose opener carries a hint, as the OPD teacher prompt does. */
  hintedShare: number;
  /** Share of corrections that also carry the judge's hint (the teacher prompt of a rewrite). */
  hintedCorrections: number;
  /** Share of hinted openers whose hint is vague (VAGUE_HINTS) and leaves the style mix as it is. */
  vagueHints: number;
  /** Chance that a reply after a correction or hint is in the preferred style. */
  compliance: number;
  /** Most assistant replies before the user gives up. */
  maxReplies: number;
}

export const DEFAULT_CORPUS: CorpusOptions = {
  seed: 1,
  conversations: 4000,
  hintedShare: 0.15,
  hintedCorrections: 0.2,
  vagueHints: 0.25,
  compliance: 0.92,
  maxReplies: 3,
};

/** What each user would correct in the styles they reject: the lessons a hint teaches. */
const PREFERENCE_LESSONS: Record<UserName, Violation[]> = {
  student: ['bold', 'list', 'marker', 'chatbot', 'no_steps'],
  teacher: ['formatted', 'short', 'cold'],
};

/** One reply in a given style to the task, or drawn from the base mix. */
export function replyTo(task: Task, work: Work, style: 'preferred' | 'base', r: Rng): string {
  if (task.user === 'student')
    return homeworkReply(style === 'preferred' ? 'natural' : weighted(r, HOMEWORK_MIX), work, r);
  const grading = task.grading!;
  return gradingReply(style === 'preferred' ? 'warm' : weighted(r, GRADING_MIX), grading.work, grading.submission, r);
}

export function conversation(problem: Problem, r: Rng, o: CorpusOptions): ChatMessage[] {
  const user = USERS[pick(r, ['student', 'teacher'] as const)];
  const task = user.task(problem, r);
  const work = task.grading?.work ?? workFor(problem, r);
  const messages: ChatMessage[] = [];
  const say = (content: string) => messages.push({ role: 'user', content });
  const reply = (content: string) => messages.push({ role: 'assistant', content });

  let guided = r.next() < o.hintedShare;
  if (guided && r.next() < o.vagueHints) {
    say(withHint(task.opener, pick(r, VAGUE_HINTS)));
    guided = false;
  } else if (guided) {
    const lessons = PREFERENCE_LESSONS[user.name].filter(() => r.next() < 0.5);
    say(withHint(task.opener, hintFor(lessons.length > 0 ? lessons : [pick(r, PREFERENCE_LESSONS[user.name])])));
  } else {
    say(task.opener);
  }
  for (let n = 1; n <= o.maxReplies; n++) {
    const text = replyTo(task, work, guided && r.next() < o.compliance ? 'preferred' : 'base', r);
    reply(text);
    const verdict = user.rubric.judge(text);
    if (verdict.accepted) {
      const saveNow = r.next() < 0.7;
      say(user.acceptance(task, saveNow, r));
      if (!saveNow) {
        reply(thanksReply(r));
        say(user.saveRequest(task, r));
      }
      reply(savedReply(task.file, r));
      break;
    }
    if (n === o.maxReplies) break;
    const correction = user.correction(verdict.violations, r);
    say(r.next() < o.hintedCorrections ? withHint(correction, hintFor(verdict.violations)) : correction);
    guided = true;
  }
  return messages;
}

export function buildCorpus(problems: readonly Problem[], o: CorpusOptions = DEFAULT_CORPUS): ChatMessage[][] {
  const r = rng(o.seed);
  return Array.from({ length: o.conversations }, (_, i) => conversation(problems[i % problems.length]!, r, o));
}
