// The simulated judge as an OpenAI-compatible endpoint (POST /v1/chat/completions, GET
// /v1/models), so `serve --judge-url` exercises the real judge client, prompts, parsing and
// voting. Answers come from judge-policy.ts; each vote's randomness is seeded by the prompt and
// the vote's seed (or its arrival count), so identical votes still differ and a run replays.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ChatMessage } from '../chat/messages.js';
import { personalizationPolicy, type JudgePolicy, type PromptKind } from './judge-policy.js';
import { hash32, rng } from './random.js';

export interface SimJudgeOptions {
  /** Chance that one vote is wrong. Default 0.2. */
  errorRate?: number;
  seed?: number;
  /** Listen here; 0 picks a free port. */
  port?: number;
  /** What it answers; default: the personalization benchmark's judge. */
  policy?: JudgePolicy;
  /** Told about every answered vote (the demo shows them). */
  onVote?: (v: VoteEvent) => void;
}

export interface VoteEvent {
  kind: PromptKind;
  /** This vote differs from what a faultless judge would say. */
  wrong: boolean;
  hint: string | null;
}

export interface SimJudge {
  /** The API root, e.g. http://127.0.0.1:PORT/v1. */
  url: string;
  model: string;
  votes: { eval: number; hint: number; wrong: number; unreadable: number };
  close(): Promise<void>;
}

export const SIM_JUDGE_MODEL = 'sim-judge';

export async function startSimJudge(o: SimJudgeOptions = {}): Promise<SimJudge> {
  const errorRate = o.errorRate ?? 0.2;
  const seed = o.seed ?? 0;
  const policy = o.policy ?? personalizationPolicy;
  const arrivals = new Map<number, number>();
  const votes = { eval: 0, hint: 0, wrong: 0, unreadable: 0 };

  const server = createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      data += chunk;
    });
    req.on('end', () => {
      try {
        route(req, res, data);
      } catch (e) {
        send(res, 400, { error: { message: (e as Error).message, type: 'invalid_request_error' } });
      }
    });
  });

  function route(req: IncomingMessage, res: ServerResponse, data: string): void {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models')
      return send(res, 200, {
        object: 'list',
        data: [{ id: SIM_JUDGE_MODEL, object: 'model', owned_by: 'openclaw-rl-sim' }],
      });
    if (req.method !== 'POST' || path !== '/v1/chat/completions')
      return send(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' } });
    const body = JSON.parse(data) as { messages?: ChatMessage[]; seed?: number };
    const key = hash32(JSON.stringify(body.messages));
    const count = arrivals.get(key) ?? 0;
    const r = rng(hash32(`${seed}:${key}:${body.seed ?? `n${count}`}`));
    const vote = policy(body.messages ?? [], errorRate, r);
    let content: string;
    if (vote === null) {
      votes.unreadable++;
      content = 'This is not a judge prompt I can read.';
    } else {
      arrivals.set(key, count + 1);
      content = vote.content;
      votes[vote.kind]++;
      if (vote.wrong) votes.wrong++;
      o.onVote?.({
        kind: vote.kind,
        wrong: vote.wrong,
        hint: /\[HINT_START\](.*)\[HINT_END\]/s.exec(content)?.[1] ?? null,
      });
    }
    send(res, 200, {
      id: `chatcmpl-sim-${Date.now().toString(36)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: SIM_JUDGE_MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    model: SIM_JUDGE_MODEL,
    votes,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function send(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}
