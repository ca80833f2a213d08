// TEST DOUBLE: a deterministic OpenAI-compatible judge endpoint for the OpenClaw end-to-end run
// (scripts/e2e-openclaw.mjs). A random tiny policy cannot judge, and no real judge is reachable
// offline, so `openclaw-rl serve --judge-url` points here. It is never part of the product.
//
// It tells the two judge prompts apart the way test/helpers/judge-double.ts does (the hint prompt's
// system message names [HINT_START]; the evaluative one asks for \boxed{}) and answers:
//   evaluative: a short reason and \boxed{1}            (every judged turn gets reward +1)
//   hint:       \boxed{1} and a fixed [HINT_START] hint  (every judged turn gets an OPD hint)
//   other:      a plain text answer
// so every main turn that has a next state yields a training sample, whatever the policy said.
// Each request is appended (kind, model, first chars of the judged request) to `log` as JSONL.
//
//   node scripts/e2e/judge-double.mjs [PORT]      # standalone, prints its URL

import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const JUDGE_HINT =
  'When the user names a file, read it with the read tool first, then answer with what it says.';

/** Starts the double on 127.0.0.1:port (0: any free port). Resolves to { url, port, requests, close }. */
export function startJudgeDouble({ port = 0, log = null } = {}) {
  const requests = [];
  const server = createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      data += chunk;
    });
    req.on('end', () => {
      if (req.method === 'GET' && /\/v1\/models$/.test(req.url ?? '')) {
        return json(res, 200, { object: 'list', data: [{ id: 'judge-double', object: 'model', owned_by: 'e2e' }] });
      }
      if (req.method !== 'POST' || !/\/chat\/completions$/.test(req.url ?? '')) {
        return json(res, 404, {
          error: {
            message: `the judge double serves POST /v1/chat/completions, not ${req.method} ${req.url}`,
            type: 'not_found',
          },
        });
      }
      let body;
      try {
        body = JSON.parse(data);
      } catch {
        return json(res, 400, { error: { message: 'body is not JSON', type: 'invalid_request_error' } });
      }
      const text = (m) =>
        typeof m?.content === 'string'
          ? m.content
          : Array.isArray(m?.content)
            ? m.content.map((p) => p?.text ?? '').join('')
            : '';
      const system = text((body.messages ?? []).find((m) => m.role === 'system'));
      const user = text((body.messages ?? []).find((m) => m.role === 'user'));
      const kind = system.includes('[HINT_START]') ? 'hint' : system.includes('\\boxed') ? 'eval' : 'other';
      const answer =
        kind === 'hint'
          ? `The user named a file that had to be read.\n\\boxed{1}\n[HINT_START]${JUDGE_HINT}[HINT_END]`
          : kind === 'eval'
            ? 'The next state continues the conversation: progress.\n\\boxed{1}'
            : 'OK.';
      const entry = {
        at: Date.now(),
        kind,
        model: body.model ?? null,
        auth: req.headers.authorization ?? null,
        request: user.slice(0, 200),
      };
      requests.push(entry);
      if (log) appendFileSync(log, `${JSON.stringify(entry)}\n`);
      if (body.stream) return sse(res, body.model, answer);
      json(res, 200, {
        id: `chatcmpl-judge-${requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? 'judge-double',
        choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      });
    });
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const actual = server.address().port;
      resolvePromise({
        url: `http://127.0.0.1:${actual}/v1`,
        port: actual,
        requests,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

function json(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function sse(res, model, answer) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (delta, finish) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-judge', object: 'chat.completion.chunk', created: 0, model: model ?? 'judge-double', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.end(`${chunk({ role: 'assistant', content: answer }, null) + chunk({}, 'stop')}data: [DONE]\n\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const double = await startJudgeDouble({ port: Number(process.argv[2] ?? 0) });
  console.log(double.url);
}
