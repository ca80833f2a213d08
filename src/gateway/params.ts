// The OpenAI chat-completions parameters: the one list of what we honour, what we accept and
// ignore (reported back in the `x-openclaw-rl-ignored` header), and what we reject; and the
// parser that turns a request body into a typed ChatRequest or a 400 naming the field.

import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { invalid } from './errors.js';
import { isObject, parseMessages, parseToolChoice, parseTools, type ToolChoice } from './validate.js';

/** Parameter -> treatment. Anything not listed is an unknown extension and ignored silently. */
export const PARAMETERS = {
  model: 'honoured: echoed back; routes side turns when listed in sideModels',
  messages: 'honoured',
  stream: 'honoured: token-by-token SSE',
  stream_options: 'honoured: include_usage',
  max_completion_tokens: 'honoured (wins over max_tokens)',
  max_tokens: 'honoured',
  temperature: 'honoured: 0..2, default from generation_config.json, else 1',
  top_p: 'honoured: (0, 1], default from generation_config.json, else 1',
  top_k: 'honoured (vLLM extension): 0 or -1 = off',
  stop: 'honoured: up to 16 strings, cut from the returned text',
  seed: 'honoured: drawn and recorded when absent',
  tools: 'honoured: rendered by the chat template',
  tool_choice:
    'honoured: auto, none (tools not shown to the model); required and named functions are accepted but sampled as auto',
  logprobs: 'honoured: model log-probs at temperature 1',
  top_logprobs: 'honoured: 0..20, needs logprobs',
  n: 'rejected unless 1',
  user: 'honoured: session identity',
  prompt_cache_key: 'honoured: OpenClaw session identity',
  session_id: 'honoured: OpenClaw-RL session identity',
  turn_type: 'honoured: main or side',
  chat_template_kwargs: 'honoured: enable_thinking',
  frequency_penalty: 'ignored',
  presence_penalty: 'ignored',
  repetition_penalty: 'ignored',
  logit_bias: 'ignored',
  response_format: 'ignored',
  parallel_tool_calls: 'ignored',
  reasoning_effort: 'ignored',
  min_p: 'ignored',
  metadata: 'ignored',
  store: 'ignored',
  service_tier: 'ignored',
  functions: 'ignored (legacy)',
  function_call: 'ignored (legacy)',
} as const;

const IGNORED = Object.entries(PARAMETERS)
  .filter(([, v]) => v.startsWith('ignored'))
  .map(([k]) => k);
const MAX_STOPS = 16;

export interface ChatRequest {
  model: string | undefined;
  messages: ChatMessage[];
  tools: ToolSpec[] | undefined;
  toolChoice: ToolChoice | undefined;
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  temperature: number | undefined;
  topP: number | undefined;
  topK: number | undefined;
  stop: string[];
  seed: number | undefined;
  logprobs: boolean;
  topLogprobs: number;
  enableThinking: boolean | undefined;
  /** Identity and kind fields carried in the body. */
  user: string | undefined;
  sessionId: string | undefined;
  promptCacheKey: string | undefined;
  turnType: string | undefined;
  /** Ignored parameters that were present with a non-null value. */
  ignored: string[];
}

function num(
  body: Record<string, unknown>,
  name: string,
  opts: { min?: number; max?: number; integer?: boolean; above?: number },
): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  const range = [
    opts.integer ? 'an integer' : 'a number',
    opts.above !== undefined ? `> ${opts.above}` : '',
    opts.min !== undefined ? `>= ${opts.min}` : '',
    opts.max !== undefined ? `<= ${opts.max}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  const ok =
    typeof v === 'number' &&
    Number.isFinite(v) &&
    (!opts.integer || Number.isSafeInteger(v)) &&
    (opts.min === undefined || v >= opts.min) &&
    (opts.max === undefined || v <= opts.max) &&
    (opts.above === undefined || v > opts.above);
  if (!ok) throw invalid(name, `${name} must be ${range}, got ${JSON.stringify(v)?.slice(0, 40)}`);
  return v as number;
}

function bool(body: Record<string, unknown>, name: string): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean')
    throw invalid(name, `${name} must be true or false, got ${JSON.stringify(v)?.slice(0, 40)}`, 'invalid_type');
  return v;
}

function str(body: Record<string, unknown>, name: string, max = 1024): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length > max)
    throw invalid(name, `${name} must be a string of at most ${max} characters`, 'invalid_type');
  return v;
}

function parseStop(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (
    !Array.isArray(list) ||
    list.length > MAX_STOPS ||
    list.some((s) => typeof s !== 'string' || s.length === 0 || s.length > 256)
  ) {
    throw invalid(
      'stop',
      `stop must be a non-empty string or an array of at most ${MAX_STOPS} non-empty strings (256 characters each)`,
    );
  }
  return list as string[];
}

export function parseChatRequest(json: unknown): ChatRequest {
  if (!isObject(json)) throw invalid(null, 'request body must be a JSON object with "messages"', 'invalid_type');
  const body = json;
  const n = num(body, 'n', { integer: true, min: 1 });
  if (n !== undefined && n > 1)
    throw invalid(
      'n',
      `n = ${n} is not supported: each request samples one completion; send ${n} requests instead`,
      'unsupported_value',
    );
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && !isObject(streamOptions))
    throw invalid('stream_options', 'stream_options must be an object', 'invalid_type');
  const includeUsage = isObject(streamOptions) ? (bool(streamOptions, 'include_usage') ?? false) : false;
  const logprobs = bool(body, 'logprobs') ?? false;
  const topLogprobs = num(body, 'top_logprobs', { integer: true, min: 0, max: 20 });
  if (topLogprobs !== undefined && topLogprobs > 0 && !logprobs)
    throw invalid('top_logprobs', 'top_logprobs needs "logprobs": true');
  const kwargs = body.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null && !isObject(kwargs))
    throw invalid('chat_template_kwargs', 'chat_template_kwargs must be an object', 'invalid_type');
  const enableThinking = isObject(kwargs) ? bool(kwargs, 'enable_thinking') : undefined;
  const topK = num(body, 'top_k', { integer: true, min: -1 });
  const seed = num(body, 'seed', { integer: true });
  // Both are checked: OpenAI refuses an invalid max_tokens even when max_completion_tokens wins.
  const maxCompletionTokens = num(body, 'max_completion_tokens', { integer: true, min: 1 });
  const maxTokens = num(body, 'max_tokens', { integer: true, min: 1 });
  const tools = parseTools(body.tools);
  return {
    model: str(body, 'model', 256),
    messages: parseMessages(body.messages),
    tools,
    toolChoice: parseToolChoice(body.tool_choice, tools),
    stream: bool(body, 'stream') ?? false,
    includeUsage,
    maxTokens: maxCompletionTokens ?? maxTokens,
    temperature: num(body, 'temperature', { min: 0, max: 2 }),
    topP: num(body, 'top_p', { above: 0, max: 1 }),
    topK: topK === undefined ? undefined : Math.max(0, topK),
    stop: parseStop(body.stop),
    seed: seed === undefined ? undefined : seed >>> 0,
    logprobs,
    topLogprobs: logprobs ? (topLogprobs ?? 0) : 0,
    enableThinking,
    user: str(body, 'user', 256),
    sessionId: str(body, 'session_id', 256),
    promptCacheKey: str(body, 'prompt_cache_key', 256),
    turnType: str(body, 'turn_type', 16),
    ignored: IGNORED.filter((name) => body[name] !== undefined && body[name] !== null),
  };
}
