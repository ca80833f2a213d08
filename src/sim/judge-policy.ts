// What the simulated judge answers, as pure functions of the prompt the real judge module sends
// (src/judge/prompts.ts). It reads the next state, the way a judge model would: a correction is
// -1 and its hint names what to change; approval, thanks or a save request is +1; anything else 0.
// With probability errorRate a vote is wrong (a flipped score, a missed hint or an invented
// one), so that majority voting has something to do.

import type { ChatMessage } from '../chat/messages.js';
import { contentToText } from '../chat/messages.js';
import { hintFor, VAGUE_HINTS } from './hints.js';
import { pick, type Rng } from './random.js';
import type { Violation } from './rubrics.js';

export type PromptKind = 'eval' | 'hint';

export interface ReadPrompt {
  kind: PromptKind;
  nextState: string;
  /** The prompt's "User request" section (the request the step worked on). */
  request: string;
  /** The prompt's "Assistant reply" section: content and `[calls tool NAME] ARGUMENTS` lines. */
  reply: string;
}

/** One vote as the simulated judge endpoint sends it, and whether it differs from a faultless judge's. */
export interface PolicyVote {
  kind: PromptKind;
  content: string;
  wrong: boolean;
}

/** What a simulated judge answers to one judge prompt; null when it is not a judge prompt. */
export type JudgePolicy = (messages: readonly ChatMessage[], errorRate: number, r: Rng) => PolicyVote | null;

/** The lessons a next-state message asks for, by the words the users' corrections use. */
const LESSON_WORDS: [Violation, RegExp][] = [
  ['bold', /\bbold\b/i],
  ['list', /numbered list|number the steps|not a list/i],
  ['heading', /\bheadings?\b/i],
  ['marker', /final answer|'answer:'/i],
  ['chatbot', /chatbot phrases|'sure!'/i],
  ['no_steps', /skipped the steps|every step shown/i],
  ['formatted', /score boxes|labels|formatting/i],
  ['short', /too short|more detail/i],
  ['cold', /sounds cold|warmer|encouraging/i],
];
const COMPLAINT = /\b(robotic|ai written|a bot|chatbot|doesn't sound like me|not quite)\b/i;
const APPROVAL = /\b(thanks|thank you|perfect|great|nice|lovely|good|append|save|add (it|them) to)\b/i;

/** Finds the judge prompt's kind and its next state; null when the prompt is not a judge prompt (no reply and next state sections). */
export function readPrompt(messages: readonly ChatMessage[]): ReadPrompt | null {
  const system = contentToText(messages.find((m) => m.role === 'system')?.content);
  const user = contentToText(messages.find((m) => m.role === 'user')?.content);
  const kind: PromptKind | null = system.includes('[HINT_START]') ? 'hint' : system.includes('\\boxed') ? 'eval' : null;
  const requestAt = user.indexOf('## User request\n');
  const replyAt = user.indexOf('## Assistant reply\n');
  const nextAt = user.lastIndexOf('## Next state');
  if (kind === null || replyAt < 0 || nextAt < replyAt) return null;
  const request = requestAt >= 0 ? user.slice(requestAt + '## User request\n'.length, replyAt).trim() : '';
  const reply = user.slice(replyAt + '## Assistant reply\n'.length, nextAt).trim();
  // The next state runs to the closing question, the prompt's last paragraph.
  const body = user.slice(user.indexOf('\n', nextAt) + 1);
  const end = body.lastIndexOf('\n\n');
  const nextState = (end >= 0 ? body.slice(0, end) : body).replace(/^\[[A-Z ]+\]\n/gm, '').trim();
  return { kind, nextState, request, reply };
}

export interface Reading {
  score: 1 | -1 | 0;
  lessons: Violation[];
}

export function readNextState(nextState: string): Reading {
  const lessons = LESSON_WORDS.filter(([, re]) => re.test(nextState)).map(([v]) => v);
  if (lessons.length > 0 || COMPLAINT.test(nextState)) return { score: -1, lessons };
  return { score: APPROVAL.test(nextState) ? 1 : 0, lessons: [] };
}

/** The personalization benchmark's judge: reads the users' next states (corrections, approvals). */
export const personalizationPolicy: JudgePolicy = (messages, errorRate, r) => {
  const prompt = readPrompt(messages);
  if (prompt === null) return null;
  const content = answer(prompt, errorRate, r);
  const said = Number(/\\boxed\{(-?\d)\}/.exec(content)![1]);
  const reading = readNextState(prompt.nextState);
  const truth = prompt.kind === 'eval' ? reading.score : reading.lessons.length > 0 ? 1 : -1;
  return { kind: prompt.kind, content, wrong: said !== truth };
};

/** One vote's answer text in the format the judge module parses. */
export function answer(prompt: ReadPrompt, errorRate: number, r: Rng): string {
  const reading = readNextState(prompt.nextState);
  const wrong = r.next() < errorRate;
  if (prompt.kind === 'eval') {
    const truth = reading.score;
    const score = !wrong ? truth : truth === 0 ? pick(r, [1, -1]) : -truth;
    const why =
      score === 1
        ? '(a) the user moves on or approves'
        : score === -1
          ? '(b) the user asks for a change'
          : '(c) unclear';
    return `The next state is ${why}.\n\\boxed{${score}}`;
  }
  const lesson = reading.lessons.length > 0 ? hintFor(reading.lessons) : null;
  const hint = wrong ? (lesson ? null : pick(r, VAGUE_HINTS)) : lesson;
  return hint
    ? `The user asked for a different style.\n\\boxed{1}\n[HINT_START]${hint}[HINT_END]`
    : 'Nothing to learn here.\n\\boxed{-1}';
}
