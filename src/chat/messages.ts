// OpenAI-style chat types shared by the HTTP layer, the prompt renderer and the completion parser.
// They describe what clients send and what we answer; validation of untrusted JSON happens elsewhere.

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

/** One part of an array-valued `content` (OpenClaw sends user messages this way). */
export interface TextContentPart {
  type: 'text';
  text: string;
}

export type MessageContent = string | null | TextContentPart[];

/** A function call made by the assistant. `arguments` is JSON text, as in the OpenAI API. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * One chat message. A flat shape rather than a union per role, because clients put fields
 * where they like and the renderer only reads what each role uses:
 * - `tool_calls`, `reasoning_content`: assistant messages;
 * - `tool_call_id`: tool messages (the id of the call they answer);
 * - `name`: a tool message's function name, or a participant name on other roles.
 */
export interface ChatMessage {
  role: ChatRole;
  content?: MessageContent;
  tool_calls?: ToolCall[];
  reasoning_content?: string | null;
  tool_call_id?: string;
  name?: string;
}

/** A tool offered to the model; `parameters` is a JSON Schema object. */
export interface ToolSpec {
  type: 'function';
  function: {
    name: string;
    description?: string;
    parameters?: Record<string, unknown>;
  };
}

/** The text of a message's content: parts are joined with newlines, null and absent become "". */
export function contentToText(content: MessageContent | undefined): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => part.text).join('\n');
}
