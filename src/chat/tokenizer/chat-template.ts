// Chat templates: our own ChatML template for models we create, and a renderer for any Hugging Face
// Jinja chat template (ours, or a real model's such as Qwen3's) through @huggingface/jinja.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import type { ToolSpec } from '../messages.js';
import { errorMessage, readModelJson } from './model-files.js';

/**
 * Our ChatML template, written for openclaw-rl. It follows the conventions Qwen3 was trained on
 * (tool signatures in the system turn, `<tool_call>` JSON blocks, tool results grouped into one
 * user turn, reasoning replayed only after the last user message) so that a model trained with it
 * and a real Qwen3 read the same transcript shapes, and so `parseCompletion` handles both.
 * It expects content already flattened to strings (see chat/prompt.ts).
 */
export const OPENCLAW_CHAT_TEMPLATE = String.raw`
{%- set has_system = messages | length > 0 and messages[0].role == 'system' %}
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if has_system %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- '# Tools\n\nThese functions are available. Their JSON signatures are listed inside <tools></tools>:\n<tools>' }}
    {%- for tool in tools %}
        {{- '\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\n</tools>\n\nTo call functions, answer with one block per call, each holding a JSON object with the function name and its arguments:\n<tool_call>\n{"name": <function-name>, "arguments": <arguments-as-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif has_system %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{#- Reasoning is replayed only for the assistant turns answering the latest user message. #}
{%- set state = namespace(last_user=-1) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}
        {%- set state.last_user = loop.index0 %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- if loop.index0 > state.last_user and message.reasoning_content %}
            {{- '<think>\n' + message.reasoning_content.strip('\n') + '\n</think>\n\n' }}
        {%- endif %}
        {{- message.content }}
        {%- for call in message.tool_calls or [] %}
            {%- if message.content or not loop.first %}
                {{- '\n' }}
            {%- endif %}
            {{- '<tool_call>\n{"name": ' + (call.function.name | tojson) + ', "arguments": ' }}
            {%- if call.function.arguments is string %}
                {{- call.function.arguments }}
            {%- else %}
                {{- call.function.arguments | tojson }}
            {%- endif %}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- elif message.role != 'system' %}
        {{- raise_exception('unsupported message role: ' + message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and not enable_thinking %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
`.trim();

/** A tool call as a template sees it: arguments may be a parsed object (templates `tojson` it). */
export interface TemplateToolCall {
  id?: string;
  type: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
}

/**
 * A message as handed to a template. `ChatMessage` fits this shape; `renderPrompt` normalizes
 * messages first (string content, tool arguments as objects) because that is what templates expect.
 */
export interface TemplateMessage {
  role: string;
  content?: unknown;
  tool_calls?: readonly TemplateToolCall[];
  reasoning_content?: string | null;
  tool_call_id?: string;
  name?: string;
}

export interface RenderOptions {
  tools?: readonly ToolSpec[];
  addGenerationPrompt?: boolean;
  /** Unset leaves `enable_thinking` undefined in the template, which is not the same as true or false. */
  enableThinking?: boolean;
}

/** Special-token strings that templates may reference (`bos_token`, `eos_token`, ...). */
const TOKEN_VARIABLES = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;

export class ChatTemplate {
  private constructor(
    /** Where the template came from, for error messages. */
    readonly source: string,
    readonly text: string,
    private readonly compiled: Template,
    private readonly tokenVariables: Readonly<Record<string, string>>,
  ) {}

  /** Compiles a template string. `source` names its origin in errors (a file path, "built-in"). */
  static fromString(text: string, source: string, tokenVariables: Record<string, string> = {}): ChatTemplate {
    let compiled: Template;
    try {
      compiled = new Template(text);
    } catch (error) {
      throw new Error(`chat template from ${source} does not parse: ${errorMessage(error)}`);
    }
    return new ChatTemplate(source, text, compiled, tokenVariables);
  }

  /**
   * Reads `chat_template` and the special-token strings from a parsed tokenizer_config.json.
   * The legacy list form ([{name, template}]) is accepted by taking the entry named "default".
   */
  static fromTokenizerConfig(config: object, source: string): ChatTemplate {
    const fields = config as Record<string, unknown>;
    const text = pickTemplate(fields.chat_template, source);
    const tokenVariables: Record<string, string> = {};
    for (const name of TOKEN_VARIABLES) {
      const token = tokenString(fields[name]);
      if (token !== undefined) tokenVariables[name] = token;
    }
    return ChatTemplate.fromString(text, source, tokenVariables);
  }

  /**
   * Loads a model folder's template. Newer transformers versions save it as chat_template.jinja
   * next to tokenizer_config.json, and that file then takes precedence over the config's field.
   */
  static async fromModelDir(dir: string): Promise<ChatTemplate> {
    const configPath = join(dir, 'tokenizer_config.json');
    const config = await readModelJson(dir, 'tokenizer_config.json');
    const jinjaPath = join(dir, 'chat_template.jinja');
    const jinja = await readFile(jinjaPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw new Error(`chat_template.jinja in ${dir} cannot be read: ${error.message}`);
    });
    if (jinja === undefined) return ChatTemplate.fromTokenizerConfig(config, configPath);
    return ChatTemplate.fromTokenizerConfig({ ...config, chat_template: jinja }, jinjaPath);
  }

  /** Renders messages to prompt text. Template errors, including `raise_exception`, name the source. */
  render(messages: readonly TemplateMessage[], opts: RenderOptions = {}): string {
    const variables: Record<string, unknown> = {
      ...this.tokenVariables,
      messages,
      add_generation_prompt: opts.addGenerationPrompt ?? false,
    };
    // Templates test `tools` and `enable_thinking` for being defined, so only set what was given.
    if (opts.tools !== undefined) variables.tools = opts.tools;
    if (opts.enableThinking !== undefined) variables.enable_thinking = opts.enableThinking;
    try {
      return this.compiled.render(variables);
    } catch (error) {
      throw new Error(`chat template from ${this.source} failed to render: ${errorMessage(error)}`);
    }
  }
}

function pickTemplate(value: unknown, source: string): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const entry = value.find((item) => (item as { name?: unknown })?.name === 'default') as
      | { template?: unknown }
      | undefined;
    if (typeof entry?.template === 'string') return entry.template;
    throw new Error(`${source} lists chat templates but none is named "default"`);
  }
  throw new Error(`${source} has no chat_template`);
}

/** Special tokens appear in configs as plain strings or as AddedToken objects ({content: ...}). */
function tokenString(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const content = (value as { content?: unknown } | null | undefined)?.content;
  return typeof content === 'string' ? content : undefined;
}
