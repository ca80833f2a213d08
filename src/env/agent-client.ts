// The agent's side of the wire for environment episodes: OpenAI-style chat requests with tools to
// `serve` (the same route and gateway path as any agent), tagged with the episode's session, task
// and rollout so the learner can group rollouts of one task, and the outcome posted to
// /v1/feedback with an idempotency key, so sending it again after a crash is safe.

import { createHash } from 'node:crypto';
import type { ChatMessage, ToolSpec } from '../chat/messages.js';

export interface EpisodeIdentity {
  sessionId: string;
  taskId: string;
  rolloutIndex: number;
  rolloutCount: number;
}

export interface AgentClientOptions {
  /** The API root, e.g. http://127.0.0.1:30000/v1. */
  url: string;
  apiKey?: string;
  model?: string;
  maxTokens: number;
  temperature?: number;
  /**
   * Seeds every request from this number, the task, the rollout index and the step, so two passes
   * over the same tasks draw the same random numbers (an evaluation's common random numbers: two
   * policies' success rates then differ by what the policies do, not by the draws). Default: unseeded.
   */
  seed?: number;
  /** Attempts for a request that failed with 5xx, 503 (busy) or a network error. */
  attempts?: number;
  /**
   * `main` (default): turns are recorded and learned from. `side`: answered only, never trained on
   * (an evaluation pass); such episodes send no outcome.
   */
  turnType?: 'main' | 'side';
}

/** A request's seed: the first 6 bytes of a hash of (seed, task, rollout, step), a safe integer. */
function requestSeed(seed: number, who: EpisodeIdentity, step: number): number {
  const digest = createHash('sha256')
    .update(`${seed}\u0000${who.taskId}\u0000${who.rolloutIndex}\u0000${step}`)
    .digest();
  return digest.readUIntBE(0, 6);
}

/** The server refused the request for a reason retrying cannot fix (4xx other than a full context). */
export class FatalRequestError extends Error {}

/** The conversation no longer fits the model's context: the episode ends there. */
export class ContextFullError extends Error {}

export class AgentClient {
  constructor(private readonly o: AgentClientOptions) {}

  /** Whether the server learns from these episodes (main turns), so their outcomes are sent. */
  get learns(): boolean {
    return (this.o.turnType ?? 'main') === 'main';
  }

  /** One assistant turn: the message as the server returned it (content and tool calls). */
  async chat(messages: readonly ChatMessage[], tools: readonly ToolSpec[], who: EpisodeIdentity): Promise<ChatMessage> {
    const body = await this.post(
      '/chat/completions',
      {
        'x-session-id': who.sessionId,
        'x-task-id': who.taskId,
        'x-rollout-index': String(who.rolloutIndex),
        'x-rollout-count': String(who.rolloutCount),
        // Environment turns are the agent's main line (recorded and learned from) unless evaluating.
        'x-turn-type': this.o.turnType ?? 'main',
      },
      {
        model: this.o.model ?? 'policy',
        messages,
        tools,
        max_tokens: this.o.maxTokens,
        stream: false,
        ...(this.o.temperature === undefined ? {} : { temperature: this.o.temperature }),
        ...(this.o.seed === undefined ? {} : { seed: requestSeed(this.o.seed, who, messages.length) }),
      },
    );
    const message = (body as { choices?: { message?: ChatMessage }[] }).choices?.[0]?.message;
    if (message === undefined) throw new Error(`serve answered without choices: ${JSON.stringify(body).slice(0, 200)}`);
    const out: ChatMessage = { role: 'assistant', content: message.content ?? '' };
    if (message.tool_calls && message.tool_calls.length > 0) out.tool_calls = message.tool_calls;
    return out;
  }

  /** Attaches the episode's outcome to its session; `duplicate` when this key was already sent. */
  async feedback(sessionId: string, reward: number, comment: string, key: string): Promise<{ duplicate: boolean }> {
    const body = await this.post('/feedback', { 'idempotency-key': key }, { session_id: sessionId, reward, comment });
    return { duplicate: (body as { duplicate?: unknown }).duplicate === true };
  }

  private async post(path: string, headers: Record<string, string>, json: unknown): Promise<unknown> {
    const attempts = this.o.attempts ?? 6;
    let last = '';
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(8000, 250 * 2 ** attempt)));
      let res: Response;
      try {
        res = await fetch(`${this.o.url}${path}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(this.o.apiKey ? { authorization: `Bearer ${this.o.apiKey}` } : {}),
            ...headers,
          },
          body: JSON.stringify(json),
        });
      } catch (e) {
        last = `network error: ${(e as Error).message}`;
        continue;
      }
      const text = await res.text();
      if (res.ok) return JSON.parse(text) as unknown;
      const message = errorMessage(text);
      if (res.status >= 500 || res.status === 429) {
        last = `${res.status}: ${message}`;
        continue;
      }
      if (res.status === 400 && /context/i.test(message)) throw new ContextFullError(message);
      throw new FatalRequestError(`POST ${path} answered ${res.status}: ${message}`);
    }
    throw new Error(`POST ${path} failed ${attempts} times; last: ${last}`);
  }
}

function errorMessage(text: string): string {
  try {
    return (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text.slice(0, 300);
  } catch {
    return text.slice(0, 300);
  }
}
