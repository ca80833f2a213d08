// `openclaw-rl serve` as a child process for end-to-end tests: started on port 0, its URL read
// from the `listening` log event, every JSON log line kept, stderr kept for failure messages.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ChatMessage } from '../../src/chat/messages.js';
import { tinyModel } from './gateway.js';

export const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface ServeProcess {
  child: ChildProcess;
  /** Base URL including /v1. */
  url: string;
  /** The server root (no /v1), for /admin routes. */
  root: string;
  lines: Record<string, unknown>[];
  stderr(): string;
  exited: Promise<number | null>;
  /** Resolves with the first log line that satisfies `match` (already logged or future). */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export async function startServe(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeProcess> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const lines: Record<string, unknown>[] = [];
  const listeners = new Set<(line: Record<string, unknown>) => void>();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  let buffer = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += d.toString();
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        line = { event: 'unparsed', text };
      }
      lines.push(line);
      for (const l of listeners) l(line);
    }
  });
  const waitForLog = (match: (line: Record<string, unknown>) => boolean, timeoutMs = 120_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const found = lines.find(match);
      if (found) return resolve(found);
      const timer = setTimeout(() => {
        listeners.delete(listener);
        reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`));
      }, timeoutMs);
      const listener = (line: Record<string, unknown>) => {
        if (match(line)) {
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(line);
        }
      };
      listeners.add(listener);
      void exited.then((code) => {
        if (listeners.delete(listener)) {
          clearTimeout(timer);
          reject(new Error(`serve exited (${code}); stderr: ${stderr.slice(-4000)}`));
        }
      });
    });
  const listening = await waitForLog((l) => l.event === 'listening', 120_000);
  const url = String(listening.url);
  return { child, url, root: url.replace(/\/v1$/, ''), lines, stderr: () => stderr, exited, waitForLog };
}

/** SIGTERM and wait; SIGKILL if it has not exited after graceMs. */
export async function stopServe(p: ServeProcess, graceMs = 30_000): Promise<number | null> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.child.exitCode;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
  const code = await p.exited;
  clearTimeout(timer);
  return code;
}

/** One main-model request in a session (6 tokens at temperature 1); it must succeed (200). */
export async function chatAsMain(
  url: string,
  session: string,
  messages: ChatMessage[],
  headers: Record<string, string> = {},
): Promise<ChatMessage> {
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session, ...headers },
    body: JSON.stringify({ model: 'main-model', messages, max_tokens: 6, temperature: 1 }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { choices: { message: ChatMessage }[] };
  return { role: 'assistant', content: body.choices[0]!.message.content ?? '' };
}

/** What a learning serve on the tiny model, judged by the judge double, varies by. */
export interface JudgedServe {
  data: string;
  judgeUrl: string;
  method?: string;
  batchSize?: string | number;
  votes?: string | number;
  adminKey?: string;
}

/**
 * serve's flags for learning on the tiny model (one thread, main model `main-model`) judged by the
 * judge double at `judgeUrl`, with no progress line; `extra` flags come last.
 */
export function judgedServeArgs(o: JudgedServe, extra: string[] = []): string[] {
  return [
    ...['--model', tinyModel(), '--data', o.data, '--threads', '1', '--main-model', 'main-model'],
    ...['--method', o.method ?? 'rl', '--batch-size', String(o.batchSize ?? 2)],
    ...['--judge-url', o.judgeUrl, '--judge-model', 'judge-double', '--judge-votes', String(o.votes ?? 3)],
    ...(o.adminKey === undefined ? [] : ['--admin-key', o.adminKey]),
    ...['--progress-seconds', '0'],
    ...extra,
  ];
}
