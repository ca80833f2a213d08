// `serve --learner torch` end to end, as processes: a scripted conversation judged by a
// test-double judge, batches trained by the PyTorch learner (LoRA and full fine-tuning) and
// published as versions that later turns are served by; a SIGKILL of the learner is reported
// while serving goes on and the next batch relaunches it from its checkpoint; a SIGKILL of serve
// loses nothing, and a restart resumes from the checkpoint and trains on. A rollback through the
// admin route serves the restored adapter as a new version. A Python without PyTorch is reported
// and serving goes on.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChatMessage } from '../src/chat/messages.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { chatAsMain, judgedServeArgs, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';
import { ADMIN, admin, probe } from './helpers/serve-probe.js';
import { TORCH_PYTHON } from './helpers/torch-learner.js';

/** One session of `turns` judged +1 turns (each next state thanks), then a closing message. */
async function session(url: string, name: string, turns: number): Promise<void> {
  const messages: ChatMessage[] = [];
  for (let i = 0; i <= turns; i++) {
    messages.push({ role: 'user', content: i === 0 ? 'What is 2 plus 2?' : `Thanks! {{eval: 1|1|1}} (${i})` });
    messages.push(await chatAsMain(url, name, messages));
  }
}

async function status(root: string): Promise<Record<string, any>> {
  const res = await fetch(`${root}/admin/status`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, any>;
}

function serveArgs(data: string, judgeUrl: string, extra: string[]): string[] {
  return judgedServeArgs({ data, judgeUrl, adminKey: ADMIN }, [
    '--learner',
    'torch',
    '--learner-python',
    TORCH_PYTHON,
    ...extra,
  ]);
}

const trained = (serve: ServeProcess, step: number) =>
  serve.waitForLog((l) => l.event === 'batch_trained' && (l.step as number) >= step, 180_000);

for (const mode of ['lora', 'full'] as const) {
  test(`serve --learner torch (${mode}): trains, publishes, survives a SIGKILL of the learner and of serve, resumes`, async (t) => {
    const judge = await startJudgeDouble({});
    const data = freshDir('torch-e2e-');
    const extra = mode === 'full' ? ['--lora-rank', '0'] : [];
    let serve = await startServe(serveArgs(data, judge.url, extra));
    t.after(async () => {
      serve.child.kill('SIGKILL');
      await judge.close();
    });
    const started = await serve.waitForLog((l) => l.event === 'learner_started');
    assert.equal(started.device, 'cpu');

    await session(serve.url, 's1', 2);
    const first = await trained(serve, 1);
    assert.ok((first.version as number) >= 1);
    await session(serve.url, 's2', 0);
    const served = (await status(serve.root)).version as number;
    assert.equal(served, first.version, 'the published version serves');

    // The learner dies: serve says so and keeps serving; the next batch relaunches it from its
    // checkpoint and trains on.
    process.kill(started.pid as number, 'SIGKILL');
    const failed = await serve.waitForLog((l) => l.event === 'learner_failed', 60_000);
    assert.match(String(failed.message), /PyTorch learner exited \(signal SIGKILL\).*serving goes on/s);
    await session(serve.url, 's3', 2);
    const restarted = await serve.waitForLog((l) => l.event === 'learner_restarted', 120_000);
    assert.deepEqual([restarted.steps, restarted.requeuedSamples], [first.step, 0]);
    const second = await trained(serve, (first.step as number) + 1);
    assert.ok((second.version as number) > (first.version as number));
    await session(serve.url, 's4', 0);
    assert.equal((await status(serve.root)).trainer.state === 'failed', false);

    // serve dies too; a restart resumes from the checkpoint and trains on.
    serve.child.kill('SIGKILL');
    await serve.exited;
    serve = await startServe(serveArgs(data, judge.url, extra));
    const resumed = await serve.waitForLog((l) => l.event === 'resumed');
    assert.equal(resumed.steps, second.step);
    assert.ok(
      (resumed.version as number) > (second.version as number),
      'the checkpoint is published under a new version',
    );
    await session(serve.url, 's5', 2);
    const next = await trained(serve, (second.step as number) + 1);
    assert.ok((next.version as number) > (resumed.version as number));
    assert.equal(await stopServe(serve), 0);
  });
}

test('serve --learner torch: a rollback through the admin route serves the restored adapter as a new version', async (t) => {
  const judge = await startJudgeDouble({});
  const data = freshDir('torch-rollback-');
  const serve = await startServe(serveArgs(data, judge.url, ['--lr', '0.01']));
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });
  await serve.waitForLog((l) => l.event === 'learner_started');
  await session(serve.url, 's1', 2);
  const first = await trained(serve, 1);
  const p1 = await probe(serve.url);
  await session(serve.url, 's2', 2);
  const second = await trained(serve, (first.step as number) + 1);
  const p2 = await probe(serve.url);
  assert.notDeepEqual(p2.logprobs, p1.logprobs, 'training changed what the model says');

  const rolled = await admin(serve.root, 'POST', '/admin/versions/rollback', { version: first.version });
  assert.equal(rolled.status, 200, JSON.stringify(rolled.json));
  const version = (second.version as number) + 1;
  assert.deepEqual([rolled.json.restores, rolled.json.version], [first.version, version]);
  assert.deepEqual(await probe(serve.url), p1, 'the new version serves the weights of the first');
  const adapter = (v: unknown) =>
    readFileSync(join(data, 'torch-learner', 'versions', `v-${v}`, 'adapter_model.safetensors'));
  assert.ok(adapter(version).equals(adapter(first.version)), 'the same adapter, byte for byte');
  const listed = (await admin(serve.root, 'GET', '/admin/versions')).json.data as Record<string, unknown>[];
  assert.deepEqual(
    listed.slice(0, 3).map((v) => [v.version, v.source, v.restores, v.weightsKept]),
    [
      [version, 'rollback', first.version, true],
      [second.version, 'train', null, true],
      [first.version, 'train', null, true],
    ],
  );
});

test('serve --learner torch with a Python that lacks PyTorch says so and serves on', async (t) => {
  // TEST DOUBLE: a real Python whose `import torch` fails, as on a machine without PyTorch.
  const dir = freshDir('torch-nopy-');
  const python = join(dir, 'python-without-torch');
  writeFileSync(
    python,
    `#!${TORCH_PYTHON}\nimport runpy, sys\nsys.modules["torch"] = None\n` +
      'assert sys.argv[1] == "-m"\nmod = sys.argv[2]\nsys.argv = [mod] + sys.argv[3:]\n' +
      'runpy.run_module(mod, run_name="__main__", alter_sys=True)\n',
  );
  chmodSync(python, 0o755);
  const judge = await startJudgeDouble({});
  const serve = await startServe([...serveArgs(join(dir, 'data'), judge.url, []), '--learner-python', python]);
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });
  const line = await serve.waitForLog((l) => l.event === 'learner_unavailable');
  assert.match(
    String(line.message),
    /cannot start with .*python-without-torch: PyTorch is not installed .*python3-torch/s,
  );
  await session(serve.url, 'n1', 2);
  await serve.waitForLog((l) => l.event === 'trainer_failed', 120_000);
  const s = await status(serve.root);
  assert.match(s.trainer.error, /unavailable: .*PyTorch is not installed/s);
  await session(serve.url, 'n2', 0);
});
