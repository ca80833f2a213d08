// The simulated users' hidden preferences, as rubrics that accept or reject one reply and say
// why. The personalization score is the share of replies a user's rubric accepts; the reasons
// become that user's corrections. Changing a rule changes every score: bump RUBRIC_VERSION.

export const RUBRIC_VERSION = 1;

/** What a reply did that the user does not want. */
export type Violation =
  // homework (the student)
  | 'bold'
  | 'list'
  | 'heading'
  | 'marker'
  | 'chatbot'
  | 'no_steps'
  // grading (the teacher)
  | 'formatted'
  | 'short'
  | 'cold';

export interface Verdict {
  accepted: boolean;
  violations: Violation[];
}

export interface Rubric {
  name: string;
  judge(reply: string): Verdict;
}

const BOLD = /\*\*|__/;
const LIST = /^\s*(\d+[.)]|[-*•])\s/m;
const HEADING = /^\s*#/m;
const MARKER = /\b(final answer|answer)\s*:/i;
const CHATBOT =
  /\b(sure!|of course!|here's the solution|let's (solve|break)|step by step|i hope this helps|let me know if)/i;
const LABEL = /^\s*(score|grade|comments|feedback)\s*:/im;
const WARM =
  /\b(nice|great|good (start|job|work)|well done|keep (it up|going)|you've got this|you're (really )?close|right track|i like)\b/i;

const numbers = (text: string) => (text.match(/\d+(\.\d+)?/g) ?? []).length;
const sentences = (text: string) => text.split(/[.!?]+(\s|$)/).filter((s) => /[a-z]/i.test(s)).length;
const words = (text: string) => (text.match(/[A-Za-z']+/g) ?? []).length;

function verdict(violations: Violation[]): Verdict {
  return { accepted: violations.length === 0, violations };
}

/** The student: homework that does not look AI-written, yet shows every step. */
export const STUDENT_RUBRIC: Rubric = {
  name: 'student',
  judge(reply) {
    const v: Violation[] = [];
    if (BOLD.test(reply)) v.push('bold');
    if (LIST.test(reply)) v.push('list');
    if (HEADING.test(reply)) v.push('heading');
    if (MARKER.test(reply)) v.push('marker');
    if (CHATBOT.test(reply)) v.push('chatbot');
    if (numbers(reply) < 4 || sentences(reply) < 2) v.push('no_steps');
    return verdict(v);
  },
};

/** The teacher: grading comments that speak to the student warmly and in detail. */
export const TEACHER_RUBRIC: Rubric = {
  name: 'teacher',
  judge(reply) {
    const v: Violation[] = [];
    if (BOLD.test(reply) || LIST.test(reply) || HEADING.test(reply) || LABEL.test(reply.replace(/\*\*/g, '')))
      v.push('formatted');
    if (words(reply) < 30 || sentences(reply) < 3) v.push('short');
    if (!WARM.test(reply) || !/\byou\b/i.test(reply) || /\bthe student\b/i.test(reply)) v.push('cold');
    return verdict(v);
  },
};
