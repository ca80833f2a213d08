// Environment throughput: steps per second of the tool-call, terminal and swe environments at
// --parallel 8 and 32, through the real gateway (recording, tool-call parsing, the feedback route)
// and, for terminal and swe, the bubblewrap sandbox of each step (and swe's probe at the end). The policy is scripted (the test
// double of test/helpers, answering instantly with a right solution), so the figure is the
// environments' and the serving path's own rate, the ceiling a model's generation time adds to.
//
//   npm run bench:environments                  # 64 tasks x 2 rollouts per environment and width
//   BENCH_TASKS=32 npm run bench:environments

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentClient } from '../src/env/agent-client.js';
import type { EnvironmentKind } from '../src/env/environment.js';
import { runEnvironment } from '../src/env/runner.js';
import { DEFAULT_LIMITS, probeSandbox } from '../src/env/sandbox.js';
import { sweKind } from '../src/env/swe.js';
import { terminalKind } from '../src/env/terminal.js';
import { toolCallKind } from '../src/env/tool-call.js';
import { startGateway } from '../test/helpers/gateway.js';
import { solvingBackend } from '../test/helpers/solving-policy.js';

const TASKS = Number(process.env.BENCH_TASKS ?? 64);
const ROLLOUTS = 2;
const WIDTHS = [8, 32];
const SEED = 5;

const toolCall = toolCallKind();
const sandbox = await probeSandbox();
const terminal = terminalKind(sandbox, DEFAULT_LIMITS);
const swe = sweKind(sandbox, DEFAULT_LIMITS);
const mathTasks = toolCall.tasks(TASKS, SEED);

const { backend } = await solvingBackend(mathTasks, [...terminal.tasks(TASKS, SEED), ...swe.tasks(TASKS, SEED)]);
const gw = await startGateway(backend, { maxConcurrentRequests: 1024 });
const client = new AgentClient({ url: `${gw.url}/v1`, maxTokens: 400 });
const work = mkdtempSync(join(tmpdir(), 'ocrl-bench-env-'));

console.log(`environment throughput: ${TASKS} tasks x ${ROLLOUTS} rollouts, scripted instant policy, real gateway`);
console.log('environment   --parallel   episodes   steps   solved   steps/s');
let runs = 0;
for (const kind of [toolCall, terminal, swe] as EnvironmentKind[]) {
  for (const parallel of WIDTHS) {
    const s = await runEnvironment({
      kind,
      client,
      out: join(work, `run-${runs++}`),
      tasks: TASKS,
      rollouts: ROLLOUTS,
      parallel,
      maxSteps: 4,
      seed: SEED,
    });
    if (s.failed > 0)
      throw new Error(`${kind.name}: ${s.failed} episodes failed: ${s.failures.slice(0, 3).join('; ')}`);
    console.log(
      `${kind.name.padEnd(13)} ${String(parallel).padStart(10)} ${String(s.episodes).padStart(10)} ${String(s.steps).padStart(7)}` +
        ` ${s.successRate.toFixed(2).padStart(8)} ${s.stepsPerSecond.toFixed(1).padStart(9)}`,
    );
  }
}
await gw.close();
rmSync(work, { recursive: true, force: true });
