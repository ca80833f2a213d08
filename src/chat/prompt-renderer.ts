// Chat-template rendering for the request path. @huggingface/jinja interprets a template at about
// 0.3 ms for a two-message prompt, and more for every message of the history, on the event loop.
// openclaw-rl's own template (OPENCLAW_CHAT_TEMPLATE, carried by every model openclaw-rl creates)
// is also written out here as plain string building, microseconds per prompt. Inputs it is not
// sure to render like the template (non-string content, other roles) go to jinja, as do all other
// templates (a real Qwen3's). Like the prompt encoder, it is checked against jinja on the first
// calls and then on a sample, and a single mismatch turns it off for good.

import {
  OPENCLAW_CHAT_TEMPLATE,
  type ChatTemplate,
  type RenderOptions,
  type TemplateMessage,
} from './tokenizer/chat-template.js';

export interface PromptRendererOptions {
  /** Jinja checks on the first N direct renders (default 32), then on 1 in `sampleEvery` (default 64). */
  verifyFirst?: number;
  sampleEvery?: number;
  /** Told once when a mismatch turns the direct renderer off. */
  onMismatch?: (detail: string) => void;
}

export class PromptRenderer {
  private direct: boolean;
  private calls = 0;

  constructor(
    private readonly template: ChatTemplate,
    private readonly opts: PromptRendererOptions = {},
  ) {
    this.direct = template.text === OPENCLAW_CHAT_TEMPLATE;
  }

  get isDirect(): boolean {
    return this.direct;
  }

  render(messages: readonly TemplateMessage[], opts: RenderOptions = {}): string {
    const text = this.direct ? renderOpenClawTemplate(messages, opts) : undefined;
    if (text === undefined) return this.template.render(messages, opts);
    const n = this.calls++;
    if (n < (this.opts.verifyFirst ?? 32) || n % (this.opts.sampleEvery ?? 64) === 0) {
      const reference = this.template.render(messages, opts);
      if (reference !== text) {
        this.direct = false;
        let at = 0;
        while (at < text.length && text[at] === reference[at]) at++;
        this.opts.onMismatch?.(
          `the direct template renderer differs from jinja at character ${at} of ${reference.length}; rendering through jinja from now on`,
        );
        return reference;
      }
    }
    return text;
  }
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/**
 * OPENCLAW_CHAT_TEMPLATE, statement by statement, or undefined for an input it does not handle.
 * Jinja details kept: `strip('\n')` trims all whitespace in @huggingface/jinja, and `tojson`
 * separates with ", " and ": ".
 */
export function renderOpenClawTemplate(messages: readonly TemplateMessage[], opts: RenderOptions): string | undefined {
  for (const m of messages) {
    if (!ROLES.has(m.role) || typeof m.content !== 'string') return undefined;
    if (m.reasoning_content !== undefined && m.reasoning_content !== null && typeof m.reasoning_content !== 'string')
      return undefined;
    for (const call of m.tool_calls ?? []) if (typeof call.function.name !== 'string') return undefined;
  }
  const hasSystem = messages.length > 0 && messages[0]!.role === 'system';
  let out = '';
  if (opts.tools && opts.tools.length > 0) {
    out += '<|im_start|>system\n';
    if (hasSystem) out += `${messages[0]!.content as string}\n\n`;
    out +=
      '# Tools\n\nThese functions are available. Their JSON signatures are listed inside <tools></tools>:\n<tools>';
    for (const tool of opts.tools) out += `\n${toJson(tool)}`;
    out +=
      '\n</tools>\n\nTo call functions, answer with one block per call, each holding a JSON object with the function name and its arguments:\n<tool_call>\n{"name": <function-name>, "arguments": <arguments-as-json-object>}\n</tool_call><|im_end|>\n';
  } else if (hasSystem) {
    out += `<|im_start|>system\n${messages[0]!.content as string}<|im_end|>\n`;
  }
  let lastUser = -1;
  messages.forEach((m, i) => {
    if (m.role === 'user') lastUser = i;
  });
  messages.forEach((m, i) => {
    const content = m.content as string;
    if (m.role === 'user' || (m.role === 'system' && i > 0)) {
      out += `<|im_start|>${m.role}\n${content}<|im_end|>\n`;
    } else if (m.role === 'assistant') {
      out += '<|im_start|>assistant\n';
      if (i > lastUser && m.reasoning_content) out += `<think>\n${m.reasoning_content.trim()}\n</think>\n\n`;
      out += content;
      (m.tool_calls ?? []).forEach((call, k) => {
        if (content || k > 0) out += '\n';
        const args = call.function.arguments;
        out += `<tool_call>\n{"name": ${JSON.stringify(call.function.name)}, "arguments": ${typeof args === 'string' ? args : toJson(args)}}\n</tool_call>`;
      });
      out += '<|im_end|>\n';
    } else if (m.role === 'tool') {
      if (i === 0 || messages[i - 1]!.role !== 'tool') out += '<|im_start|>user';
      out += `\n<tool_response>\n${content}\n</tool_response>`;
      if (i === messages.length - 1 || messages[i + 1]!.role !== 'tool') out += '<|im_end|>\n';
    }
  });
  if (opts.addGenerationPrompt) {
    out += '<|im_start|>assistant\n';
    if (opts.enableThinking === false) out += '<think>\n\n</think>\n\n';
  }
  return out;
}

/** @huggingface/jinja's `tojson` (no indent): JSON with ", " and ": " separators. */
function toJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return `[${value.map(toJson).join(', ')}]`;
  if (typeof value === 'object')
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${toJson(v)}`)
      .join(', ')}}`;
  return JSON.stringify(value);
}
