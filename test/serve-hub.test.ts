// `openclaw-rl serve --model owner/name` as a process against the local Hub double
// (test/helpers/hub-double.ts): the first start downloads the model into the Hugging Face cache
// named by HF_HUB_CACHE and serves it under the id owner/name; a second start with
// HF_HUB_OFFLINE=1 (and the Hub unreachable) serves from that cache without a request; with the Hub
// unreachable and nothing cached, serve refuses to start and says the machine may be offline.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshDir, tinyModel } from './helpers/gateway.js';
import { closedPort, HubDouble } from './helpers/hub-double.js';
import { CLI, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';

const REPO = 'owner/name';
const SERVE_ARGS = ['--no-learning', '--threads', '1', '--progress-seconds', '0'];

/** The environment of a user with an empty Hugging Face setup under `home`: no token, no offline mode. */
function hubEnv(home: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HOME: home, HF_HUB_CACHE: join(home, 'hub'), ...extra };
  for (const k of [
    'HF_TOKEN',
    'HUGGING_FACE_HUB_TOKEN',
    'XDG_CACHE_HOME',
    ...(extra.HF_HUB_OFFLINE ? [] : ['HF_HUB_OFFLINE']),
  ])
    delete env[k];
  return env;
}

/** Runs serve to its exit (it must not start); rejects if it is still running after `ms`. */
function serveUntilExit(
  args: string[],
  env: NodeJS.ProcessEnv,
  ms = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`serve did not exit within ${ms} ms; stdout: ${stdout.slice(-2000)}; stderr: ${stderr.slice(-2000)}`),
      );
    }, ms);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** GET /v1/models lists the id; a chat completion is answered 200 by the downloaded model. */
async function checkServes(serve: ServeProcess): Promise<void> {
  const models = await fetch(`${serve.url}/models`);
  assert.equal(models.status, 200);
  assert.deepEqual(
    ((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id),
    [REPO],
  );
  // Both spellings of the id in the path: escaped (openai-node) and as is (openai-python, curl).
  for (const path of [encodeURIComponent(REPO), REPO]) {
    const one = await fetch(`${serve.url}/models/${path}`);
    assert.equal(one.status, 200, `GET /v1/models/${path}`);
    assert.equal(((await one.json()) as { id: string }).id, REPO);
  }
  const res = await fetch(`${serve.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: REPO,
      messages: [{ role: 'user', content: 'Hello there' }],
      max_tokens: 6,
      temperature: 0,
    }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const body = JSON.parse(text) as {
    model: string;
    choices: { message: { role: string } }[];
    usage: { completion_tokens: number };
  };
  assert.equal(body.model, REPO);
  assert.equal(body.choices[0]!.message.role, 'assistant');
  assert.ok(body.usage.completion_tokens >= 1 && body.usage.completion_tokens <= 6);
}

test('serve --model owner/name downloads from HF_ENDPOINT into HF_HUB_CACHE, serves it, and starts again offline from the cache', async (t) => {
  const source = tinyModel();
  const hub = await HubDouble.start([
    { id: REPO, dir: source, files: { 'README.md': '# a model card serve does not need' } },
  ]);
  t.after(() => hub.close());
  const home = freshDir('hf-home-');
  const cache = join(home, 'hub');

  // First start: downloads.
  const first = await startServe(
    ['--model', REPO, '--data', freshDir('data-'), ...SERVE_ARGS],
    hubEnv(home, { HF_ENDPOINT: hub.endpoint }),
  );
  try {
    assert.equal(first.lines.find((l) => l.event === 'listening')!.model, REPO, 'the listening line names the Hub id');
    await checkServes(first);
  } finally {
    assert.equal(await stopServe(first), 0);
  }
  assert.match(
    first.stderr(),
    /downloading owner\/name: 100% \(.* of .*, (\d+)\/\1 files/,
    'a progress line for a pipe, ending at 100%',
  );
  assert.ok(
    hub.requests.some((r) => r.server === 'cdn'),
    'the weights came through the CDN redirect',
  );
  assert.ok(!hub.requests.some((r) => r.path.includes('README')), 'files the engine does not need are not fetched');

  // The files, in huggingface_hub's layout under HF_HUB_CACHE, byte for byte.
  const commit = hub.commit(REPO);
  const repoDir = join(cache, 'models--owner--name');
  assert.equal(readFileSync(join(repoDir, 'refs', 'main'), 'utf8'), commit);
  const snapshot = join(repoDir, 'snapshots', commit);
  const expected = readdirSync(source).sort();
  assert.ok(
    expected.includes('model.safetensors') && expected.includes('tokenizer.json') && expected.includes('config.json'),
  );
  assert.deepEqual(readdirSync(snapshot).sort(), expected);
  for (const name of expected) {
    assert.ok(lstatSync(join(snapshot, name)).isSymbolicLink(), `${name} links into blobs/`);
    assert.ok(readFileSync(join(snapshot, name)).equals(readFileSync(join(source, name))), `${name} is byte-identical`);
  }
  assert.deepEqual(readdirSync(home), ['hub'], 'nothing but the cache is written under HF_HOME');

  // Second start: offline mode, and the Hub unreachable besides; served from the cache, nothing asked.
  const asked = hub.requests.length;
  const nowhere = `http://127.0.0.1:${await closedPort()}`;
  const second = await startServe(
    ['--model', REPO, '--data', freshDir('data-'), ...SERVE_ARGS],
    hubEnv(home, { HF_ENDPOINT: nowhere, HF_HUB_OFFLINE: '1' }),
  );
  try {
    await checkServes(second);
  } finally {
    assert.equal(await stopServe(second), 0);
  }
  assert.equal(hub.requests.length, asked, 'the second start asked the Hub nothing');
  assert.doesNotMatch(second.stderr(), /downloading/, 'no download the second time');
});

test('serve --model owner/name with the Hub unreachable and an empty cache exits 1 and says the machine may be offline', async () => {
  const home = freshDir('hf-home-');
  const data = join(freshDir('data-'), 'store');
  const port = await closedPort();
  const run = await serveUntilExit(
    ['--model', REPO, '--data', data, ...SERVE_ARGS],
    hubEnv(home, { HF_ENDPOINT: `http://127.0.0.1:${port}` }),
  );
  assert.equal(run.code, 1, `exit code; stderr: ${run.stderr}`);
  assert.match(
    run.stderr,
    new RegExp(
      `^openclaw-rl: cannot reach http://127\\.0\\.0\\.1:${port} to download owner/name \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)\\. ` +
        'This machine may be offline: download the model folder elsewhere and pass its path to --model, or set HF_ENDPOINT to a mirror\\.\\n$',
    ),
  );
  assert.doesNotMatch(run.stdout, /listening/);
  assert.ok(!existsSync(data), 'no store is created for a model that could not be had');
  assert.ok(!existsSync(join(home, 'hub', 'models--owner--name', 'snapshots')), 'no snapshot is left behind');

  // Offline mode with nothing cached: the same refusal, naming the cache and the setting.
  const offline = await serveUntilExit(
    ['--model', REPO, '--data', data, ...SERVE_ARGS],
    hubEnv(home, { HF_ENDPOINT: `http://127.0.0.1:${port}`, HF_HUB_OFFLINE: '1' }),
  );
  assert.equal(offline.code, 1, `exit code; stderr: ${offline.stderr}`);
  assert.match(
    offline.stderr,
    new RegExp(
      `^openclaw-rl: owner/name@main is not in the cache ${join(home, 'hub').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, and offline mode is on \\(HF_HUB_OFFLINE\\)`,
    ),
  );
});
