// `openclaw-rl sim` as a person runs it: usage, bad flags refused before any model work, and the
// simulated judge served on its own for `serve --judge-url`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const cli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });

test('sim --help lists the commands; the top-level usage names sim', () => {
  const r = cli('sim', '--help');
  assert.equal(r.status, 0);
  for (const c of ['pretrain', 'judge', 'run', 'bench', 'demo']) assert.match(r.stdout, new RegExp(`\\n  ${c} `));
  assert.match(cli('--help').stdout, /\n {2}sim {10}/);
});

test('bad flags are refused at once, with what to change', () => {
  const cases: [string[], RegExp][] = [
    [['sim', 'run', '--method', 'ppo'], /method must be one of rl, opd, combine, got "ppo"/],
    [['sim', 'run', '--steps', '6', '--eval-every', '4'], /--steps 6 must be a multiple of --eval-every 4/],
    [['sim', 'bench', '--seeds', '1,x'], /--seeds takes integers, got "x"/],
    [['sim', 'run', '--error-rate', '2'], /--error-rate must be a number >= 0 <= 1/],
    [['sim', 'fly'], /unknown sim command "fly"/],
  ];
  for (const [args, message] of cases) {
    const r = cli(...args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, message);
  }
});

test('sim judge serves an OpenAI-compatible endpoint that answers judge prompts', async () => {
  const child = spawn(process.execPath, [CLI, 'sim', 'judge', '--error-rate', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        const m = /on (http:\/\/\S+\/v1)/.exec(d.toString());
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`sim judge exited with ${code}`)));
    });
    const models = (await (await fetch(`${url}/models`)).json()) as { data: { id: string }[] };
    assert.equal(models.data[0]!.id, 'sim-judge');
    const res = await fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim-judge',
        messages: [
          { role: 'system', content: 'Grade it. End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.' },
          {
            role: 'user',
            content:
              '## User request\nhelp\n\n## Assistant reply\n**Final answer:** 3\n\n## Next state (a user message)\n[USER]\ntoo robotic, drop the bold\n\nIs the next state progress?',
          },
        ],
      }),
    });
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    assert.match(body.choices[0]!.message.content, /\\boxed\{-1\}$/);
  } finally {
    child.kill('SIGTERM');
  }
});
