// What a hindsight hint says about each kind of correction, in the judge's own words (a hint that
// copies the user's message is rejected by the judge module). The simulated judge writes these;
// the corpus shows the base policy instructions phrased this way, as the OPD teacher sees them.

import { contentToText } from '../chat/messages.js';
import { hintedMessages } from '../learn/teacher.js';
import type { Violation } from './rubrics.js';

const LESSONS: Record<Violation, string> = {
  bold: 'Write plain text without any bold formatting.',
  list: 'Explain the steps in ordinary sentences instead of a numbered list.',
  heading: 'Leave out section headings.',
  marker: "End naturally instead of with a 'Final answer' label.",
  chatbot: "Avoid assistant phrases such as 'Sure!' and sound like a student.",
  no_steps: 'Show every calculation, not only the result.',
  formatted: 'Write the feedback as plain sentences without scores or labels.',
  short: 'Give detailed feedback that walks through what the student did.',
  cold: 'Speak to the student directly in a warm, encouraging tone.',
};

/**
 * Hints that sound useful but name no preference: what the judge invents when it errs. The corpus
 * shows them too, followed by the usual style mix, so for the OPD teacher a vague hint changes
 * nothing, as it would for a real model; only a hint naming a preference moves the teacher.
 */
export const VAGUE_HINTS: readonly string[] = [
  'Make sure every part of the work is easy to follow.',
  'Keep the explanation focused on the question that was asked.',
];

/** A hint naming every lesson, in a fixed order so equal lessons give equal hints. */
export function hintFor(lessons: readonly Violation[]): string {
  const ordered = (Object.keys(LESSONS) as Violation[]).filter((v) => lessons.includes(v));
  return ordered.map((v) => LESSONS[v]).join(' ');
}

/** A user message as the OPD teacher prompt carries a hint (the learning loop's own rule). */
export function withHint(userText: string, hint: string): string {
  return contentToText(hintedMessages([{ role: 'user', content: userText }], hint)[0]!.content);
}
