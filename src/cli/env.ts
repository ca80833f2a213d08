// openclaw-rl env run [options] [-- serve options]
//
//   openclaw-rl env run --env tool-call --url http://127.0.0.1:30000/v1 --tasks 16 --rollouts 4
//   openclaw-rl env run --env terminal --model models/small --parallel 32 --out runs/terminal
//   openclaw-rl env run --env swe --model models/small --tasks 6
//
// Plays agent environments (src/env) against `serve`: an already running one (--url), or one it
// starts on --model with any serve options after `--`. Only wiring here.

import { join, resolve } from 'node:path';
import { AgentClient } from '../env/agent-client.js';
import type { EnvironmentKind } from '../env/environment.js';
import { runEnvironment, type RunProgress } from '../env/runner.js';
import { DEFAULT_LIMITS, probeSandbox, type SandboxLimits } from '../env/sandbox.js';
import { sweKind } from '../env/swe.js';
import { terminalKind } from '../env/terminal.js';
import { arithmeticKind, TOOL_CALL_SOURCES, toolCallKind } from '../env/tool-call.js';
import { startServe, type ServeProcess } from '../sim/serve-process.js';
import { bar, Console } from '../sim/terminal.js';
import { CliError, numberFlag, parseFlags } from './args.js';

const USAGE = `usage: openclaw-rl env run --env tool-call|terminal|swe (--url URL | --model DIR) [options] [-- serve options]

Plays environment episodes against serve: each step is a chat request with tools, each episode's
outcome is posted to /v1/feedback. See docs/agents.md.

server:
  --url URL           a running serve's API root (e.g. http://127.0.0.1:30000/v1)
  --api-key KEY       its API key (default: OPENCLAW_RL_API_KEY)
  --model DIR         start serve on this model instead; options after -- go to serve
  --data DIR          the started serve's data folder (default OUT/serve-data)

episodes:
  --env E             tool-call (GSM8K and a calculator), terminal (shell tasks in a sandbox) or swe
                      (fix a bug in a generated Python repository, in the same sandbox)
  --tasks N           tasks (default 8)
  --tasks-from S      tool-call only: gsm8k (default) or arithmetic (generated one- and two-step problems)
  --rollouts G        rollouts per task (default 4)
  --parallel P        episodes at once (default 8)
  --max-steps N       chat requests per episode (default 8)
  --max-tokens N      per request (default 256)
  --temperature X     default: the model's
  --seed N            chooses the tasks (default 1)
  --out DIR           results, resumable (default runs/env-ENV)
  --evaluate          side turns: answered, never trained on, no outcome sent (a measurement pass)

terminal and swe sandbox (per command):
  --command-seconds N default ${DEFAULT_LIMITS.commandSeconds}
  --memory-mb N       address space per process (default ${DEFAULT_LIMITS.memoryMb})
  --processes N       default ${DEFAULT_LIMITS.processes}
  --output-bytes N    default ${DEFAULT_LIMITS.outputBytes}`;

const FLAGS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  model: { type: 'string' },
  data: { type: 'string' },
  env: { type: 'string' },
  tasks: { type: 'string' },
  'tasks-from': { type: 'string' },
  rollouts: { type: 'string' },
  parallel: { type: 'string' },
  'max-steps': { type: 'string' },
  'max-tokens': { type: 'string' },
  temperature: { type: 'string' },
  seed: { type: 'string' },
  out: { type: 'string' },
  evaluate: { type: 'boolean' },
  'command-seconds': { type: 'string' },
  'memory-mb': { type: 'string' },
  processes: { type: 'string' },
  'output-bytes': { type: 'string' },
} as const;

export async function runEnv(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command !== 'run') throw new CliError(`unknown env command "${command}"\n\n${USAGE}`);
  const dash = rest.indexOf('--');
  const serveArgs = dash >= 0 ? rest.slice(dash + 1) : [];
  const v = parseFlags(dash >= 0 ? rest.slice(0, dash) : rest, FLAGS, USAGE);
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const envName = v.env;
  if (envName !== 'tool-call' && envName !== 'terminal' && envName !== 'swe')
    throw new CliError(`--env must be tool-call, terminal or swe, got "${String(envName ?? '')}"\n\n${USAGE}`);
  if ((v.url === undefined) === (v.model === undefined))
    throw new CliError(`give either --url (a running serve) or --model (start one)\n\n${USAGE}`);
  if (v.url !== undefined && serveArgs.length > 0)
    throw new CliError('options after -- are for a started serve (--model)');
  const int = (name: string, fallback: number, min = 1) => numberFlag(v, name, { integer: true, min }) ?? fallback;
  const options = {
    tasks: int('tasks', 8),
    rollouts: int('rollouts', 4),
    parallel: int('parallel', 8),
    maxSteps: int('max-steps', 8),
    seed: int('seed', 1, 0),
  };
  const maxTokens = int('max-tokens', 256);
  const temperature = numberFlag(v, 'temperature', { min: 0 });
  const limits: SandboxLimits = {
    ...DEFAULT_LIMITS,
    commandSeconds: int('command-seconds', DEFAULT_LIMITS.commandSeconds),
    memoryMb: int('memory-mb', DEFAULT_LIMITS.memoryMb, 16),
    processes: int('processes', DEFAULT_LIMITS.processes),
    outputBytes: int('output-bytes', DEFAULT_LIMITS.outputBytes),
  };
  const out = resolve((v.out as string | undefined) ?? join('runs', `env-${envName}`));

  const source = (v['tasks-from'] as string | undefined) ?? 'gsm8k';
  if (!(TOOL_CALL_SOURCES as readonly string[]).includes(source))
    throw new CliError(`--tasks-from must be ${TOOL_CALL_SOURCES.join(' or ')}, got "${source}"`);
  if (envName !== 'tool-call' && v['tasks-from'] !== undefined)
    throw new CliError('--tasks-from is for the tool-call environment');
  // The sandbox is proven before anything starts: no terminal or swe episode runs without one.
  const kind: EnvironmentKind =
    envName === 'terminal'
      ? terminalKind(await probeSandbox(), limits)
      : envName === 'swe'
        ? sweKind(await probeSandbox(), limits)
        : source === 'arithmetic'
          ? arithmeticKind()
          : toolCallKind();
  kind.tasks(options.tasks, options.seed); // a --tasks beyond the task set fails here, before serve starts

  const ui = new Console(process.stderr);
  let printedTenth = -1;
  let serve: ServeProcess | null = null;
  let url = v.url as string | undefined;
  if (url === undefined) {
    ui.line(`starting serve on ${v.model as string}...`);
    const data = resolve((v.data as string | undefined) ?? join(out, 'serve-data'));
    serve = await startServe(['--model', resolve(v.model as string), '--data', data, ...serveArgs]);
    url = serve.url;
    ui.line(`serve is listening on ${url}`);
  }
  // Interrupted: what finished is on disk already; stop the serve we started, then exit (the
  // sandboxes of the episodes in flight are removed on exit).
  const stop = (signal: NodeJS.Signals) => {
    void (serve?.stop() ?? Promise.resolve()).finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', stop).once('SIGTERM', stop);
  try {
    const client = new AgentClient({
      url: url.replace(/\/$/, ''),
      apiKey: (v['api-key'] as string | undefined) ?? process.env.OPENCLAW_RL_API_KEY,
      maxTokens,
      ...(temperature === undefined ? {} : { temperature }),
      ...(v.evaluate === true ? { turnType: 'side' as const } : {}),
    });
    const summary = await runEnvironment({
      kind,
      client,
      out,
      ...options,
      onProgress: (p) => {
        // Off a terminal: a line per tenth of the episodes.
        const tenth = Math.floor((10 * p.done) / Math.max(1, p.total));
        ui.setStatus(progressLine(envName, p), tenth > printedTenth);
        printedTenth = Math.max(printedTenth, tenth);
      },
    });
    ui.endStatus();
    for (const t of summary.byTask.slice(0, 20))
      ui.line(`${t.taskId.padEnd(28)} ${t.successes}/${t.rollouts} solved  mean reward ${t.meanReward.toFixed(2)}`);
    if (summary.byTask.length > 20) ui.line(`... ${summary.byTask.length - 20} more tasks in summary.json`);
    ui.line(
      `${summary.episodes} episodes, success rate ${summary.successRate.toFixed(3)}, ` +
        `${summary.stepsPerSecond.toFixed(2)} steps/s at --parallel ${options.parallel}` +
        (summary.skipped > 0 ? ` (${summary.skipped} resumed from ${out})` : ''),
    );
    for (const f of summary.failures.slice(0, 5)) ui.line(`failed: ${f}`);
    console.log(JSON.stringify({ out, summaryFile: join(out, 'summary.json'), ...summary }));
    return summary.failed > 0 ? 1 : 0;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
    await serve?.stop();
  }
}

function progressLine(env: string, p: RunProgress): string {
  const left = p.done - p.skipped > 0 ? (p.elapsedSeconds / (p.done - p.skipped)) * (p.total - p.done) : 0;
  return (
    `${env} ${bar(p.total === 0 ? 1 : p.done / p.total)} ${p.done}/${p.total} episodes  ` +
    `${p.successes} solved  ${p.stepsPerSecond.toFixed(1)} steps/s` +
    (p.failed > 0 ? `  ${p.failed} failed` : '') +
    (left > 0 ? `  ~${Math.ceil(left / 60)} min left` : '')
  );
}
