// The OPD teacher: the turn's own prompt with the accepted hint appended to its last user message
// (the original's rule), rendered by the model's chat template, scores the exact sampled
// completion ids. teacher[t] = log p(completion_t | hinted prompt, completion_<t), one value per
// completion token, token 0 included (the original gave token 0 a fake 0).

import { contentToText, type ChatMessage, type ToolSpec } from '../chat/messages.js';
import type { RenderIds } from '../chat/prompt-codec.js';
import type { Scorer } from '../engine/types.js';
import type { Turn } from '../types.js';

export interface TeacherModel {
  /** Renders prompts as the gateway does (chat/prompt-codec.ts renderIdsOf on the served codec). */
  render: RenderIds;
  scorer: Scorer;
  contextLength: number;
}

/** Separates the user's words from the hint inside the hinted message. */
export const HINT_HEADER = '[hindsight hint for this request]';

/**
 * A copy of `messages` whose last user message (the last message when no user spoke; a new user
 * message when there are none) ends with the hint. Array content is flattened to text.
 */
export function hintedMessages(messages: readonly ChatMessage[], hint: string): ChatMessage[] {
  const out = messages.map((m) => ({ ...m }));
  let i = out.map((m) => m.role).lastIndexOf('user');
  if (i < 0) i = out.length - 1;
  if (i < 0) return [{ role: 'user', content: `${HINT_HEADER}\n${hint}`.trim() }];
  out[i] = { ...out[i]!, content: `${contentToText(out[i]!.content)}\n\n${HINT_HEADER}\n${hint}`.trim() };
  return out;
}

export type TeacherResult =
  | { ok: true; logprobs: number[]; version: number; promptTokens: number }
  | { ok: false; reason: 'prompt_not_reproducible' | 'too_long' | 'scoring_failed'; detail: string };

/**
 * Scores the turn's completion under the hinted prompt with policy `version`. The rendering
 * settings (tools, thinking switch) are the ones that reproduce the turn's recorded prompt ids,
 * so the hint is the only difference between the two prompts.
 */
export async function teacherLogprobs(
  model: TeacherModel,
  turn: Pick<Turn, 'messages' | 'tools' | 'promptIds' | 'completionIds'>,
  hint: string,
  version: number,
): Promise<TeacherResult> {
  const settings = reproducingSettings(model.render, turn);
  if (!settings)
    return {
      ok: false,
      reason: 'prompt_not_reproducible',
      detail: "no rendering of the turn's messages gives its recorded prompt ids",
    };
  const promptIds = model.render(hintedMessages(turn.messages, hint), settings.tools, settings.enableThinking);
  const total = promptIds.length + turn.completionIds.length;
  if (total > model.contextLength)
    return {
      ok: false,
      reason: 'too_long',
      detail: `hinted prompt ${promptIds.length} + completion ${turn.completionIds.length} tokens exceed the context of ${model.contextLength}`,
    };
  try {
    const scored = await model.scorer.logprobs(promptIds, turn.completionIds, { version });
    if (scored.logprobs.length !== turn.completionIds.length)
      throw new Error(`${scored.logprobs.length} log-probs for ${turn.completionIds.length} tokens`);
    return { ok: true, logprobs: scored.logprobs, version, promptTokens: promptIds.length };
  } catch (e) {
    return { ok: false, reason: 'scoring_failed', detail: e instanceof Error ? e.message : String(e) };
  }
}

function reproducingSettings(
  render: RenderIds,
  turn: Pick<Turn, 'messages' | 'tools' | 'promptIds'>,
): { tools: readonly ToolSpec[] | undefined; enableThinking: boolean | undefined } | null {
  const toolOptions = turn.tools && turn.tools.length > 0 ? [turn.tools, undefined] : [undefined];
  for (const tools of toolOptions) {
    for (const enableThinking of [undefined, false, true]) {
      let ids: number[];
      try {
        ids = render(turn.messages, tools, enableThinking);
      } catch {
        continue;
      }
      if (sameIds(ids, turn.promptIds)) return { tools, enableThinking };
    }
  }
  return null;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
