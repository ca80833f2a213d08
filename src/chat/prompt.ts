// OpenAI-style messages -> prompt text and ids, through the model's chat template.

import type { ChatTemplate, RenderOptions, TemplateMessage } from './tokenizer/chat-template.js';
import type { TextTokenizer } from './tokenizer/tokenizer.js';
import { contentToText, type ChatMessage } from './messages.js';

export interface RenderedPrompt {
  text: string;
  ids: number[];
  /**
   * The prompt ends inside an open `<think>` (templates of thinking-only models open it in the
   * generation prompt), so the completion starts with reasoning: pass to parseCompletion.
   */
  thinkingOpen: boolean;
}

export function renderPrompt(
  template: ChatTemplate,
  tokenizer: TextTokenizer,
  messages: readonly ChatMessage[],
  opts: RenderOptions = {},
): RenderedPrompt {
  const text = template.render(messages.map(toTemplateMessage), opts);
  return { text, ids: tokenizer.encode(text), thinkingOpen: text.trimEnd().endsWith('<think>') };
}

/**
 * Puts a message in the shape chat templates are written for (Hugging Face's): content as a plain
 * string (templates concatenate it; null would fail), 'developer' as 'system', and tool-call
 * arguments as objects so templates can `tojson` them. Absent fields stay absent, since
 * templates test them with `is defined`.
 */
export function toTemplateMessage(message: ChatMessage): TemplateMessage {
  const out: TemplateMessage = {
    role: message.role === 'developer' ? 'system' : message.role,
    content: contentToText(message.content),
  };
  if (message.tool_calls !== undefined) {
    out.tool_calls = message.tool_calls.map((call) => ({
      id: call.id,
      type: call.type,
      function: { name: call.function.name, arguments: argumentsForTemplate(call.function.arguments) },
    }));
  }
  if (typeof message.reasoning_content === 'string') out.reasoning_content = message.reasoning_content;
  if (message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
  if (message.name !== undefined) out.name = message.name;
  return out;
}

/** A JSON object string becomes the object; anything else is passed through as written. */
function argumentsForTemplate(text: string): string | Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Not JSON: the template renders the string verbatim.
  }
  return text;
}
