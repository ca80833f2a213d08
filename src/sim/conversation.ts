// One simulated conversation through `serve`, as the original harness runs it: the user opens
// with the task, asks for rewrites until the reply passes their rubric (or they give up), then
// asks to save, and stops once the agent confirms (the closing sentinel is never sent, so the
// last turn gets no next state). Every follow-up is the next state of the previous turn, so
// each goes through `gate` first: the benchmark uses it to stop feeding the learner at a step.

import type { ServeClient } from './client.js';
import type { Rng } from './random.js';
import type { Verdict } from './rubrics.js';
import type { SimUser, Task } from './users.js';

export interface ConversationEvent {
  sessionId: string;
  user: SimUser['name'];
  role: 'user' | 'assistant';
  text: string;
  /** The rubric's verdict on a reply to the task (not on confirmations). */
  verdict?: Verdict;
}

export interface ConversationOptions {
  maxReplies: number;
  maxTokens: number;
  /** Resolves when the next state may be sent; call the returned function once it was answered. */
  gate: () => Promise<() => void>;
  onEvent?: (e: ConversationEvent) => void;
}

export async function converse(
  client: ServeClient,
  user: SimUser,
  task: Task,
  sessionId: string,
  r: Rng,
  o: ConversationOptions,
): Promise<void> {
  const messages: { role: 'user' | 'assistant'; content: string }[] = [];
  const emit = (role: 'user' | 'assistant', text: string, verdict?: Verdict) =>
    o.onEvent?.({ sessionId, user: user.name, role, text, ...(verdict ? { verdict } : {}) });
  const send = async (text: string, gated: boolean): Promise<string> => {
    const release = gated ? await o.gate() : () => {};
    try {
      messages.push({ role: 'user', content: text });
      emit('user', text);
      const reply = await client.chat(sessionId, messages, { kind: 'main', maxTokens: o.maxTokens });
      messages.push({ role: 'assistant', content: reply.text });
      return reply.text;
    } finally {
      release();
    }
  };

  let reply = await send(task.opener, false);
  for (let attempts = 1; ; attempts++) {
    const verdict = user.rubric.judge(reply);
    emit('assistant', reply, verdict);
    if (verdict.accepted) break;
    if (attempts >= o.maxReplies) return; // gives up: this last reply gets no next state
    reply = await send(user.correction(verdict.violations, r), true);
  }
  const saveNow = r.next() < 0.7;
  reply = await send(user.acceptance(task, saveNow, r), true);
  emit('assistant', reply);
  if (!saveNow) {
    reply = await send(user.saveRequest(task, r), true);
    emit('assistant', reply);
  }
}
