// The PyTorch learner's data parallelism: 2 ranks on one node (gloo), and two launcher "nodes"
// on loopback (--nnodes 2, static rendezvous on 127.0.0.1) give the update one rank gives, which
// is the TypeScript learner's (within 1e-4).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { DEFAULT_LAUNCH, launchCommand, learnerEnv } from '../src/engine/torch/launcher.js';
import { assertSame, setup, TORCH_PYTHON, trainTorch, trainTs } from './helpers/torch-learner.js';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  await once(server, 'close');
  return port;
}

test('2 ranks on one node give the 1-rank update (LoRA, qwen3)', async () => {
  const s = setup('qwen3', true);
  const one = await trainTorch(s);
  const two = await trainTorch(s, { nproc: 2 });
  assertSame('1 rank vs 2 ranks', one, two, 1e-5);
  assertSame('TypeScript vs 2 ranks', await trainTs(s), two);
});

test('two launcher nodes on 127.0.0.1 (--nnodes 2) give the 1-rank update (full fine-tuning, llama)', async () => {
  const s = setup('llama', false);
  const port = await freePort();
  const launch = { ...DEFAULT_LAUNCH, python: TORCH_PYTHON, nnodes: 2, masterAddr: '127.0.0.1', masterPort: port };
  const node1 = launchCommand(launch, 1);
  const follower = spawn(node1.command, node1.args, { env: learnerEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
  let followerErr = '';
  follower.stderr.setEncoding('utf8').on('data', (d: string) => {
    followerErr += d;
  });
  const exited = once(follower, 'exit');
  try {
    const two = await trainTorch(s, launch);
    const late = new Promise<never>((_, reject) => {
      setTimeout(() => reject(new Error('node 1 did not exit within 60 s of node 0')), 60_000).unref();
    });
    const [code] = await Promise.race([exited, late]);
    assert.equal(code, 0, `node 1 exited with ${code}: ${followerErr.slice(-2000)}`);
    assertSame('TypeScript vs 2 nodes', await trainTs(s), two);
  } finally {
    if (follower.exitCode === null) follower.kill('SIGKILL');
  }
});
