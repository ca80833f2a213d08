// `openclaw-rl serve` and `openclaw-rl export` as processes: startup refusal off loopback, a
// recorded conversation across a restart (the live turn is restored and gets its next state),
// a clean SIGTERM, and the JSONL export.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freshDir, tinyModel } from './helpers/gateway.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

interface Served {
  child: ChildProcess;
  url: string;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
}

async function serve(args: string[]): Promise<Served> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--model', tinyModel(), '--port', '0', '--threads', '1', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: Record<string, unknown>[] = [];
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = JSON.parse(buffer.slice(0, nl)) as Record<string, unknown>;
        buffer = buffer.slice(nl + 1);
        lines.push(line);
        if (line.event === 'listening') resolve(String(line.url));
      }
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before listening: ${stderr}`)));
  });
  return { child, url, lines, exited };
}

async function chat(url: string, messages: unknown[]): Promise<string> {
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-affinity': 'cli-1:0' },
    body: JSON.stringify({ model: 'main-model', messages, max_tokens: 4, seed: 5 }),
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
}

test('serve refuses to listen off loopback without API keys', () => {
  const run = spawnSync(process.execPath, [CLI, 'serve', '--model', tinyModel(), '--host', '0.0.0.0'], {
    encoding: 'utf8',
    env: { ...process.env, OPENCLAW_RL_API_KEYS: '' },
  });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /refusing to listen on 0\.0\.0\.0 without API keys/);
});

test('serve records across a restart; export writes the turns as JSONL', async () => {
  const data = freshDir('cli-');
  const first = await serve(['--data', data, '--main-model', 'main-model', '--session-idle', '600']);
  assert.match(first.url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  const config = first.lines.find((l) => l.event === 'listening')!.config as Record<string, unknown>;
  assert.equal(config.apiKeys, '0 key(s)');
  const answer = await chat(first.url, [{ role: 'user', content: 'remember the number 42' }]);
  first.child.kill('SIGTERM');
  assert.equal(await first.exited, 0);
  assert.ok(first.lines.some((l) => l.event === 'stopped'));

  const second = await serve(['--data', data, '--main-model', 'main-model', '--session-idle', '600']);
  assert.ok(
    second.lines.some((l) => l.event === 'sessions_restored' && l.liveTurns === 1),
    'the open turn is live again',
  );
  await chat(second.url, [
    { role: 'user', content: 'remember the number 42' },
    { role: 'assistant', content: answer },
    { role: 'user', content: 'what was it?' },
  ]);
  second.child.kill('SIGTERM');
  assert.equal(await second.exited, 0);

  const out = join(data, 'turns.jsonl');
  const run = spawnSync(process.execPath, [CLI, 'export', '--data', data, '--out', out], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stderr, /exported 2 turn\(s\) to/);
  const lines = readFileSync(out, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(lines.length, 2);
  assert.deepEqual(
    lines.map((l) => [l.session_id, l.kind, l.closure_reason]),
    [
      ['cli-1', 'main', 'next_state'],
      ['cli-1', 'main', null],
    ],
  );
  assert.deepEqual(lines[0].next_state.messages, [{ role: 'user', content: 'what was it?' }]);
  for (const key of [
    'messages',
    'prompt_ids',
    'completion_ids',
    'logprobs',
    'sampled_logprobs',
    'policy_version',
    'next_state',
    'closure_reason',
  ])
    assert.ok(key in lines[0], key);
  const stdout = spawnSync(process.execPath, [CLI, 'export', '--data', data, '--kind', 'side'], { encoding: 'utf8' });
  assert.equal(stdout.stdout, '');
  const missing = spawnSync(process.execPath, [CLI, 'export', '--data', join(data, 'nope')], { encoding: 'utf8' });
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /no store in .*nope/);
});

test('serve exits with a clear message when its port is taken, instead of hanging without one', async () => {
  const { createServer } = await import('node:net');
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const port = (blocker.address() as { port: number }).port;
  try {
    const run = spawnSync(
      process.execPath,
      [
        CLI,
        'serve',
        '--model',
        tinyModel(),
        '--port',
        String(port),
        '--data',
        freshDir('port-'),
        '--threads',
        '1',
        '--progress-seconds',
        '0',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(run.signal, null, 'serve did not exit by itself');
    assert.equal(run.status, 2);
    assert.match(run.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use`));
  } finally {
    blocker.close();
  }
});
