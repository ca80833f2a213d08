// The README's main command for now: writes a small random Qwen3-family model folder once
// (models/demo) and generates from it with the embedded engine. The model is random, so the
// text is gibberish; what it shows is the real path: folder loading, chat template, sampling
// with per-token log-probs, tokens/s.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const cli = ['dist/src/cli/main.js'];
const run = (args) => {
  const r = spawnSync(process.execPath, [...cli, ...args], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
};
if (!existsSync('models/demo/config.json')) run(['model', 'init', '--family', 'qwen3', '--preset', 'small', '--out', 'models/demo']);
run(['generate', '--model', 'models/demo', '--prompt', 'Tell me about your day.', '--max-tokens', '48', '--seed', '7']);
