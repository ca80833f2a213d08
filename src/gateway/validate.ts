// Untrusted JSON -> typed chat messages and tools. Every rejection names the exact field
// (`messages[3].tool_calls[0].function.arguments`) and what would be accepted. The result holds
// only the fields we understand, so what is stored and rendered is exactly what was checked.

import type { ChatMessage, ChatRole, MessageContent, TextContentPart, ToolCall, ToolSpec } from '../chat/messages.js';
import { invalid } from './errors.js';

const ROLES: readonly ChatRole[] = ['system', 'developer', 'user', 'assistant', 'tool'];
const MAX_MESSAGES = 20_000;
const MAX_TOOLS = 512;

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? `the string ${JSON.stringify(value.slice(0, 40))}` : `a ${typeof value}`;
}

function requireString(value: unknown, path: string, what = 'a string'): string {
  if (typeof value !== 'string') throw invalid(path, `${path} must be ${what}, got ${describe(value)}`, 'invalid_type');
  return value;
}

function optionalString(value: unknown, path: string): string | undefined {
  return value === undefined ? undefined : requireString(value, path);
}

export function parseMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw invalid(
      'messages',
      `messages must be a non-empty array of message objects, got ${describe(value)}`,
      'invalid_type',
    );
  }
  if (value.length > MAX_MESSAGES)
    throw invalid('messages', `messages has ${value.length} entries, more than the ${MAX_MESSAGES} accepted`);
  const messages = value.map((m, i) => parseMessage(m, `messages[${i}]`));
  checkToolResults(messages);
  return messages;
}

/**
 * As OpenAI does: a tool message answers a call of the assistant message it follows (other tool
 * messages between them), so a result with no call, or an id no call has, is refused.
 */
function checkToolResults(messages: readonly ChatMessage[]): void {
  let calls: ReadonlySet<string> | null = null;
  messages.forEach((m, i) => {
    if (m.role !== 'tool') {
      calls = m.role === 'assistant' && m.tool_calls?.length ? new Set(m.tool_calls.map((c) => c.id)) : null;
      return;
    }
    const path = `messages[${i}].tool_call_id`;
    if (calls === null) {
      throw invalid(
        `messages[${i}]`,
        `messages[${i}] has role "tool" but does not follow an assistant message with tool_calls: ` +
          'a tool message must answer one of its calls',
        'invalid_tool_message',
      );
    }
    if (!calls.has(m.tool_call_id!)) {
      const ids = [...calls].map((c) => JSON.stringify(c.slice(0, 64))).join(', ');
      throw invalid(
        path,
        `${path} ${JSON.stringify(m.tool_call_id!.slice(0, 64))} matches no id in the tool_calls of the assistant message before it (${ids})`,
        'invalid_tool_message',
      );
    }
  });
}

function parseMessage(value: unknown, path: string): ChatMessage {
  if (!isObject(value)) throw invalid(path, `${path} must be a message object, got ${describe(value)}`, 'invalid_type');
  const role = value.role;
  if (typeof role !== 'string' || !ROLES.includes(role as ChatRole)) {
    throw invalid(
      `${path}.role`,
      `${path}.role must be one of ${ROLES.join(', ')}; got ${describe(role)}`,
      'invalid_role',
    );
  }
  const out: ChatMessage = {
    role: role as ChatRole,
    content: parseContent(value.content, `${path}.content`, role as ChatRole, value.tool_calls !== undefined),
  };
  if (value.tool_calls !== undefined && value.tool_calls !== null) {
    if (role !== 'assistant')
      throw invalid(
        `${path}.tool_calls`,
        `${path}.tool_calls is only valid on assistant messages (this one is ${role})`,
      );
    out.tool_calls = parseToolCalls(value.tool_calls, `${path}.tool_calls`);
  }
  if (role === 'tool') {
    out.tool_call_id = requireString(
      value.tool_call_id,
      `${path}.tool_call_id`,
      'the id of the tool call this message answers',
    );
    if (out.tool_call_id === '') {
      throw invalid(
        `${path}.tool_call_id`,
        `${path}.tool_call_id is empty: it must be the id of the tool call this message answers`,
      );
    }
  }
  if (value.reasoning_content !== undefined && value.reasoning_content !== null) {
    out.reasoning_content = requireString(value.reasoning_content, `${path}.reasoning_content`);
  }
  const name = optionalString(value.name, `${path}.name`);
  if (name !== undefined) out.name = name;
  return out;
}

function parseContent(value: unknown, path: string, role: ChatRole, hasToolCalls: boolean): MessageContent {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) {
    if (role === 'assistant') return null;
    throw invalid(path, `${path} is required on ${role} messages (a string or an array of text parts)`, 'invalid_type');
  }
  if (!Array.isArray(value)) {
    throw invalid(
      path,
      `${path} must be a string, an array of text parts${hasToolCalls ? ' or null' : ''}; got ${describe(value)}`,
      'invalid_type',
    );
  }
  return value.map((part, i): TextContentPart => {
    const p = `${path}[${i}]`;
    if (!isObject(part)) throw invalid(p, `${p} must be a content part object, got ${describe(part)}`, 'invalid_type');
    if (part.type !== 'text') {
      throw invalid(
        `${p}.type`,
        `${p}.type is ${describe(part.type)}: only text parts ({"type": "text", "text": ...}) are supported by this model`,
        'unsupported_content',
      );
    }
    return { type: 'text', text: requireString(part.text, `${p}.text`) };
  });
}

function parseToolCalls(value: unknown, path: string): ToolCall[] {
  if (!Array.isArray(value)) throw invalid(path, `${path} must be an array, got ${describe(value)}`, 'invalid_type');
  return value.map((call, i) => {
    const p = `${path}[${i}]`;
    if (!isObject(call)) throw invalid(p, `${p} must be a tool call object, got ${describe(call)}`, 'invalid_type');
    if (call.type !== undefined && call.type !== 'function')
      throw invalid(`${p}.type`, `${p}.type must be "function", got ${describe(call.type)}`);
    if (!isObject(call.function))
      throw invalid(
        `${p}.function`,
        `${p}.function must be an object with name and arguments, got ${describe(call.function)}`,
        'invalid_type',
      );
    return {
      id: requireString(call.id, `${p}.id`),
      type: 'function',
      function: {
        name: requireString(call.function.name, `${p}.function.name`),
        arguments: requireString(call.function.arguments ?? '{}', `${p}.function.arguments`, 'a JSON string'),
      },
    };
  });
}

export function parseTools(value: unknown): ToolSpec[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value))
    throw invalid(
      'tools',
      `tools must be an array of {"type": "function", "function": {...}} objects, got ${describe(value)}`,
      'invalid_type',
    );
  if (value.length > MAX_TOOLS)
    throw invalid('tools', `tools has ${value.length} entries, more than the ${MAX_TOOLS} accepted`);
  if (value.length === 0) return undefined;
  return value.map((tool, i) => {
    const p = `tools[${i}]`;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) {
      throw invalid(
        p,
        `${p} must be {"type": "function", "function": {"name": ..., "parameters": {...}}}`,
        'invalid_type',
      );
    }
    const name = requireString(tool.function.name, `${p}.function.name`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this rejects
    if (!/^[^\s\u0000-\u001f]{1,256}$/.test(name))
      throw invalid(`${p}.function.name`, `${p}.function.name must be 1-256 characters without spaces`);
    const spec: ToolSpec = { type: 'function', function: { name } };
    const description = optionalString(tool.function.description, `${p}.function.description`);
    if (description !== undefined) spec.function.description = description;
    if (tool.function.parameters !== undefined) {
      if (!isObject(tool.function.parameters))
        throw invalid(
          `${p}.function.parameters`,
          `${p}.function.parameters must be a JSON Schema object`,
          'invalid_type',
        );
      spec.function.parameters = tool.function.parameters;
    }
    return spec;
  });
}

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** tool_choice; a named function must be one of `tools`, as OpenAI requires. */
export function parseToolChoice(value: unknown, tools: readonly ToolSpec[] | undefined): ToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  if (
    isObject(value) &&
    value.type === 'function' &&
    isObject(value.function) &&
    typeof value.function.name === 'string'
  ) {
    const name = value.function.name;
    if (!tools?.some((t) => t.function.name === name)) {
      const names = tools
        ?.map((t) => t.function.name)
        .slice(0, 20)
        .join(', ');
      const known = names ? `the tools are ${names}` : 'the request has no tools';
      throw invalid(
        'tool_choice',
        `tool_choice names the function ${JSON.stringify(name.slice(0, 64))}, which is not in tools (${known})`,
      );
    }
    return { name };
  }
  throw invalid(
    'tool_choice',
    `tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}, got ${describe(value)}`,
  );
}
