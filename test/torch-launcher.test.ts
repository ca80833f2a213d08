// The PyTorch learner's launch: serve's flags, the launcher command line for one and several
// nodes, and the start-up check's messages when Python or PyTorch is missing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { torchLaunchOf } from '../src/cli/serve-torch.js';
import { DEFAULT_LAUNCH, freeLoopbackPort, launchCommand, preflight } from '../src/engine/torch/launcher.js';
import { scratchDir } from './helpers/models.js';
import { TORCH_PYTHON } from './helpers/torch-learner.js';

test('--learner flags: torch options need --learner torch, and bad values are named', () => {
  assert.equal(torchLaunchOf({}), null);
  assert.throws(() => torchLaunchOf({ 'learner-nproc': '2' }), /--learner-nproc needs --learner torch/);
  assert.throws(() => torchLaunchOf({ learner: 'jax' }), /--learner must be local or torch, got "jax"/);
  assert.throws(
    () => torchLaunchOf({ learner: 'torch', 'learner-device': 'tpu' }),
    /--learner-device must be cpu, cuda or mps/,
  );
  assert.throws(
    () => torchLaunchOf({ learner: 'torch', 'learner-nproc': '0' }),
    /--learner-nproc must be an integer >= 1/,
  );
  assert.throws(
    () => torchLaunchOf({ learner: 'torch', 'learner-shard': 'zero3' }),
    /--learner-shard must be none, optimizer or fsdp, got "zero3"/,
  );
  assert.equal(torchLaunchOf({ learner: 'torch' })!.shard, 'none');
  const l = torchLaunchOf({
    learner: 'torch',
    'learner-nproc': '4',
    'learner-device': 'cuda',
    'learner-nnodes': '2',
    'learner-master-addr': '10.0.0.1',
    'learner-master-port': '29600',
    'learner-python': '/opt/py',
    'learner-shard': 'optimizer',
  })!;
  assert.deepEqual(l, {
    shard: 'optimizer',
    python: '/opt/py',
    nproc: 4,
    device: 'cuda',
    nnodes: 2,
    masterAddr: '10.0.0.1',
    masterPort: 29600,
  });
});

test('the launcher command: standalone on one node; a static rendezvous on node 0 for several', () => {
  const one = launchCommand({ ...DEFAULT_LAUNCH, python: 'py', nproc: 2 });
  assert.equal(one.command, 'py');
  assert.deepEqual(one.args.slice(0, 5), ['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2']);
  assert.deepEqual(one.args.slice(-4), ['-m', 'openclaw_rl_learner', '--device', 'cpu']);
  const two = launchCommand(
    { ...DEFAULT_LAUNCH, python: 'py', nnodes: 2, masterAddr: '10.0.0.1', masterPort: 29600 },
    1,
  );
  const at = (flag: string) => two.args[two.args.indexOf(flag) + 1];
  assert.deepEqual(
    [at('--nnodes'), at('--node_rank'), at('--master_addr'), at('--master_port')],
    ['2', '1', '10.0.0.1', '29600'],
  );
  assert.ok(!two.args.includes('--standalone'));
  // One node with a port (TorchLearner picks a free one): the same static rendezvous on it.
  const own = launchCommand({ ...DEFAULT_LAUNCH, python: 'py', masterPort: 41234 });
  const ownAt = (flag: string) => own.args[own.args.indexOf(flag) + 1];
  assert.deepEqual(
    [ownAt('--nnodes'), ownAt('--node_rank'), ownAt('--master_addr'), ownAt('--master_port')],
    ['1', '0', '127.0.0.1', '41234'],
  );
  assert.ok(!own.args.includes('--standalone'));
});

test('a free loopback port: one that a server can listen on', async () => {
  const port = await freeLoopbackPort();
  assert.ok(port > 0 && port < 65536);
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

test('the start-up check names what is missing: no such Python, no PyTorch, no CUDA', () => {
  assert.throws(
    () => preflight({ ...DEFAULT_LAUNCH, python: '/nonexistent/python3' }),
    /needs Python with PyTorch, but \/nonexistent\/python3 was not found; set --learner-python/,
  );
  // TEST DOUBLE: a real Python whose `import torch` fails, as on a machine without PyTorch.
  const python = join(scratchDir('ocrl-nopy-'), 'python-without-torch');
  writeFileSync(
    python,
    `#!${TORCH_PYTHON}\nimport runpy, sys\nsys.modules["torch"] = None\n` +
      'mod = sys.argv[2]\nsys.argv = [mod] + sys.argv[3:]\nrunpy.run_module(mod, run_name="__main__", alter_sys=True)\n',
  );
  chmodSync(python, 0o755);
  assert.throws(
    () => preflight({ ...DEFAULT_LAUNCH, python }),
    /cannot start with .*python-without-torch: PyTorch is not installed .*install python3-torch/,
  );
  assert.equal(preflight({ ...DEFAULT_LAUNCH, python: TORCH_PYTHON }).ok, true);
  // 64 ranks on one node need 64 GPUs: no machine here has them, whether its PyTorch sees CUDA or not.
  assert.throws(
    () => preflight({ ...DEFAULT_LAUNCH, python: TORCH_PYTHON, device: 'cuda', nproc: 64 }),
    /sees no CUDA device|64 ranks per node need 64 CUDA devices/,
  );
});
