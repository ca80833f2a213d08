// How much other CPU load on the machine slows the in-process sampler: its throughput at 32
// streams alone, then with another process spinning at 50% and at 100% of a core (no memory
// traffic, no I/O). On 2 vCPUs the engine worker and the main thread already use both cores
// when steps are cheap (the tiny model), so the gateway's extra work (its main thread, the client,
// the kernel's TCP work) costs throughput that it does not cost with heavier steps.
//
//   npm run build && node dist/bench/cpu-contention.js [tiny|small]

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { renderPrompt } from '../src/chat/prompt.js';
import { loadChatBackend } from '../src/cli/chat-model.js';
import { ROOT } from './models.js';

const STREAMS = 32;
const REQUESTS = 6;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const preset = process.argv[2] ?? 'tiny';
const backend = await loadChatBackend(join(ROOT, '.cache', 'bench-models', preset), 'bench', { threads: 1 });
const promptIds = renderPrompt(
  backend.template,
  backend.tokenizer,
  [{ role: 'user', content: 'Please summarise what we decided about the trip to Lisbon.' }],
  { addGenerationPrompt: true },
).ids;

async function tokensPerSecond(): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: STREAMS }, async (_, w) => {
      for (let i = 0; i < REQUESTS; i++) {
        for await (const e of backend.sampler.generate(promptIds, {
          maxTokens: 32,
          temperature: 1,
          topP: 1,
          seed: w * 1000 + i,
        }))
          if (e.type === 'token') n++;
      }
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

/** Another process that spins `duty` of every 10 ms and sleeps the rest. */
function spinner(duty: number) {
  const code = `const sleep = new Int32Array(new SharedArrayBuffer(4));
    for (;;) { const t = performance.now(); while (performance.now() - t < ${duty * 10}) {} if (${duty} < 1) Atomics.wait(sleep, 0, 0, ${(1 - duty) * 10}); }`;
  return spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
}

await tokensPerSecond(); // warm-up
const slowdowns: Record<string, number[]> = { '50%': [], '100%': [] };
for (let r = 0; r < ROUNDS; r++) {
  const alone = await tokensPerSecond();
  for (const [name, duty] of [
    ['50%', 0.5],
    ['100%', 1],
  ] as const) {
    const child = spinner(duty);
    const busy = await tokensPerSecond();
    child.kill();
    slowdowns[name]!.push((1 - busy / alone) * 100);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`${preset} model, ${STREAMS} streams in-process, engine on 1 BLAS thread, ${ROUNDS} rounds`);
for (const [name, xs] of Object.entries(slowdowns)) {
  console.log(
    `another process spinning ${name.padStart(4)} of a core: engine throughput -${median(xs).toFixed(1)}% (median; rounds ${xs.map((x) => x.toFixed(1)).join(' ')})`,
  );
}
await backend.close();
