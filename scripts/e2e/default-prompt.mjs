// The e2e run's second scenario: stock OpenClaw with its default tool profile, whose prompt is
// about 17 k tokens on the tool model's tokenizer (a 40 kB system prompt and a dozen tools) on
// every turn, against a 32 k-context copy of the tool model. One session talks for four turns,
// the server trains and publishes a batch of full-size samples, and a fifth turn is served by the
// new version. Checks: every turn succeeds; the prompts are full size; turns after the first
// reuse the prefix cache for nearly all of their prompt; the batch trained full-size samples; the
// serve process's peak RSS stays under a bound computed from the model's shapes and the server's
// own memory settings (printed); each turn's time is reported.

import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import {
  freePort,
  providerError,
  readServeLog,
  runCommand,
  say,
  sleep,
  startGroup,
  stopGroup,
  waitFor,
} from './harness.mjs';
import { startJudgeDouble } from './judge-double.mjs';

const CONTEXT = 32768;
const SESSION = 'e2e-full';
const API_KEY = 'e2e-key';
const ADMIN_KEY = 'e2e-admin-key';
const GW_TOKEN = 'e2e-gateway-token';
/** A turn's prompt is "full size" above this many tokens (OpenClaw's default prompt is about 17 k). */
const FULL_SIZE = 12000;
/** A later turn "hits the prefix cache" when at least this share of its prompt came from it. */
const HIT_SHARE = 0.9;

/** Resident and peak resident memory of a process, in bytes (Linux). */
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

const mb = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MB`;

/**
 * ctx: { root, cli, node24, openclaw, work (an empty folder), toolModelDir, check(name, ok, detail) }.
 * Returns the per-turn report lines.
 */
export async function defaultPromptScenario(ctx) {
  const { root, cli, node24, openclaw, work, check } = ctx;
  for (const d of ['home/.openclaw', 'home/workspace', 'logs', 'data']) mkdirSync(join(work, d), { recursive: true });
  const logs = join(work, 'logs');

  // The tool model with a context that fits OpenClaw's default prompt and a growing session.
  const model = join(work, 'tool-model-32k');
  cpSync(ctx.toolModelDir, model, { recursive: true });
  const config = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'));
  config.max_position_embeddings = CONTEXT;
  writeFileSync(join(model, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);

  const judge = await startJudgeDouble({ log: join(logs, 'judge-requests.jsonl') });
  const port = await freePort();
  const serveArgs = [
    cli,
    'serve',
    '--model',
    model,
    '--model-id',
    'e2e-tool-model-32k',
    '--port',
    String(port),
    '--data',
    join(work, 'data'),
    '--side-model',
    'side-model',
    '--main-model',
    'main-model',
    '--method',
    'combine',
    '--batch-size',
    '2',
    '--judge-url',
    judge.url,
    '--judge-model',
    'judge-double',
    '--judge-votes',
    '1',
    '--progress-seconds',
    '0',
  ];
  const serve = startGroup('openclaw-rl serve (default prompt)', process.execPath, serveArgs, {
    env: { ...process.env, OPENCLAW_RL_ADMIN_KEYS: ADMIN_KEY, OPENCLAW_RL_API_KEYS: API_KEY },
    log: join(logs, 'serve.log'),
    cwd: root,
  });
  const base = `http://127.0.0.1:${port}`;
  let gateway = null;
  try {
    await waitFor('openclaw-rl serve', async () => (await fetch(`${base}/readyz`)).ok, 120000, serve);
    const ready = memoryOf(serve.pid);
    const listening = readServeLog(logs).find((e) => e.event === 'memory_plan') ?? null;
    say(`default prompt: serve ready on ${base}/v1, RSS ${mb(ready.rss)}`);

    const gwPort = await freePort();
    const home = join(work, 'home');
    const ocConfig = readFileSync(join(root, 'scripts/e2e/openclaw.e2e.json5'), 'utf8')
      .replaceAll('__WORK__', work)
      .replaceAll('__PROVIDER_URL__', `${base}/v1`)
      .replaceAll('__API_KEY__', API_KEY)
      .replaceAll('__TIMEOUT_S__', '600')
      .replaceAll('__MAX_TOKENS__', '24')
      .replaceAll('__GW_PORT__', String(gwPort))
      .replaceAll('__GW_TOKEN__', GW_TOKEN)
      .replaceAll('__TOOLS__', '')
      .replaceAll('__PROMPT_KNOBS__', '');
    writeFileSync(join(home, '.openclaw/openclaw.json'), ocConfig);
    const ocEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'NODE_OPTIONS')),
      HOME: home,
      OPENCLAW_NO_AUTO_UPDATE: '1',
      PATH: `${join(node24, '..')}:${process.env.PATH}`,
    };
    const oc = (args, timeoutMs) => runCommand(node24, [openclaw, ...args], { env: ocEnv, cwd: home, timeoutMs });
    gateway = startGroup('openclaw gateway (default prompt)', node24, [openclaw, 'gateway', 'run'], {
      env: ocEnv,
      log: join(logs, 'gateway.out'),
      cwd: home,
    });
    await waitFor(
      'openclaw gateway',
      async () =>
        (await fetch(`http://127.0.0.1:${gwPort}/v1/models`, { headers: { authorization: `Bearer ${GW_TOKEN}` } }))
          .status === 200,
      180000,
      gateway,
    );

    const turns = [];
    const agentTurn = async (message) => {
      const t = Date.now();
      const r = await oc(['agent', '--session-id', SESSION, '--message', message, '--json'], 600000);
      writeFileSync(join(logs, `agent-${turns.length + 1}.json`), `${r.stdout}\n--- stderr ---\n${r.stderr}`);
      let parsed = null;
      try {
        parsed = JSON.parse(r.stdout);
      } catch {
        /* reported below */
      }
      const reply = ((parsed?.result ?? parsed)?.payloads ?? []).map((p) => p?.text ?? '').join('\n');
      const error =
        r.code !== 0
          ? `exit ${r.code}${r.timedOut ? ' (timeout)' : ''}: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`
          : !parsed
            ? 'output is not JSON'
            : providerError(reply);
      const turn = { message, ok: error === null, error, ms: Date.now() - t };
      turns.push(turn);
      say(
        `${turn.ok ? 'ok  ' : 'FAIL'} default prompt turn ${turns.length}: ${(turn.ms / 1000).toFixed(1)} s${error ? ` ${error}` : ''}`,
      );
      return turn;
    };
    for (let i = 1; i <= 4; i++) await agentTurn(`Turn ${i} of a long session: what should I do next?`);
    // The first three turns have their next states: a batch of two full-size samples trains.
    const until = Date.now() + 600000;
    let trained = null;
    while (!trained && Date.now() < until && !serve.exited) {
      trained = readServeLog(logs).find((e) => e.event === 'batch_trained') ?? null;
      if (!trained) await sleep(2000);
    }
    say(
      trained
        ? `default prompt: batch trained and published as version ${trained.version} (${trained.trainSeconds?.toFixed?.(1)} s)`
        : 'default prompt: no batch trained',
    );
    if (trained) await agentTurn('Turn 5, after the update: anything else?');
    const peak = memoryOf(serve.pid).peak;
    const status = await fetch(`${base}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
      .then((r) => r.json())
      .catch(() => null);
    await stopGroup(gateway);
    gateway = null;
    const serveStopped = await stopGroup(serve, 30000);
    await judge.close();

    // ---- assertions ----
    const serveLog = readServeLog(logs);
    const require = createRequire(import.meta.url);
    const Database = require('better-sqlite3');
    const db = new Database(join(work, 'data/openclaw-rl.sqlite'), { readonly: true });
    const main = db
      .prepare(`SELECT id, prompt_tokens, completion_tokens, policy_version, closure_reason FROM turns
      WHERE kind = 'main' AND session_id = ? ORDER BY received_at`)
      .all(SESSION);
    const samples = db
      .prepare(
        `SELECT s.status, t.prompt_tokens + t.completion_tokens AS tokens FROM samples s JOIN turns t ON t.id = s.turn_id`,
      )
      .all();
    db.close();
    const requests = new Map(serveLog.filter((e) => e.event === 'request' && e.turnId).map((e) => [e.turnId, e]));
    const report = main.map((t, i) => {
      const r = requests.get(t.id) ?? {};
      return {
        turn: i + 1,
        prompt: t.prompt_tokens,
        cached: r.cachedTokens ?? 0,
        ms: r.ms ?? null,
        firstTokenMs: r.firstTokenMs ?? null,
        version: t.policy_version,
      };
    });
    for (const r of report) {
      say(
        `  main turn ${r.turn}: prompt ${r.prompt} tokens, ${r.cached} from the prefix cache, server ${r.ms === null ? '?' : (r.ms / 1000).toFixed(2)} s` +
          `${r.firstTokenMs === null ? '' : ` (first token ${(r.firstTokenMs / 1000).toFixed(2)} s)`}, version ${r.version}`,
      );
    }
    check(
      'default prompt: every OpenClaw turn succeeded',
      turns.length >= 4 && turns.every((t) => t.ok),
      turns.map((t) => t.error ?? `${(t.ms / 1000).toFixed(1)} s`).join('; '),
    );
    check(
      `default prompt: at least 4 main turns in session ${SESSION}, each with a full-size prompt (> ${FULL_SIZE} tokens)`,
      main.length >= 4 && main.every((t) => t.prompt_tokens > FULL_SIZE),
      main.map((t) => t.prompt_tokens).join(', '),
    );
    // Keys and values depend on the weights: a turn can reuse only its predecessor's on the same version.
    const later = report.filter((r, i) => i > 0 && report[i - 1].version === r.version);
    check(
      `default prompt: every later turn on its predecessor's version took at least ${HIT_SHARE * 100}% of its prompt from the prefix cache`,
      later.length >= 3 && later.every((r) => r.cached >= HIT_SHARE * r.prompt),
      later.map((r) => `${r.cached}/${r.prompt}`).join(', '),
    );
    const cacheStatus = status?.prefixCache ?? null;
    check(
      'default prompt: /admin/status counts prefix-cache hit and miss tokens',
      cacheStatus !== null && cacheStatus.hitTokens > 0 && cacheStatus.missTokens > 0,
      JSON.stringify(cacheStatus),
    );
    const started = serveLog.find((e) => e.event === 'batch_started');
    check(
      `default prompt: a batch of full-size samples was trained and published`,
      !!trained &&
        !!started &&
        started.tokens > 2 * FULL_SIZE &&
        samples.filter((s) => s.status === 'trained').every((s) => s.tokens > FULL_SIZE),
      started
        ? `${started.samples} samples, ${started.tokens} tokens; ${trained ? `version ${trained.version}` : 'not trained'}`
        : 'no batch started',
    );
    check(
      'default prompt: a later turn was served by the new version',
      !!trained && main.at(-1)?.policy_version >= 1,
      `last turn v${main.at(-1)?.policy_version}`,
    );
    const plan = listening ?? serveLog.find((e) => e.event === 'memory_plan');
    const bound = plan
      ? ready.rss + plan.kvCacheBytes + plan.learnerStateBytes + plan.trainBytes + plan.runtimeAllowanceBytes
      : NaN;
    check(
      "default prompt: the serve process's peak RSS stays under the bound computed from the model's shapes",
      peak < bound,
      `peak ${mb(peak)}; bound ${mb(bound)} = RSS when ready ${mb(ready.rss)} + KV cache budget ${mb(plan?.kvCacheBytes ?? NaN)}` +
        ` + learner state ${mb(plan?.learnerStateBytes ?? NaN)}` +
        ` + training step at ${plan?.maxTrainTokens} tokens ${mb(plan?.trainBytes ?? NaN)} + allowance ${mb(plan?.runtimeAllowanceBytes ?? NaN)}`,
    );
    const errors = serveLog.filter((e) => /error|fatal|crash/i.test(e.event ?? '') && e.event !== 'request');
    check(
      'default prompt: no error events in the server log, and serve stopped',
      errors.length === 0 && serveStopped,
      errors
        .slice(0, 3)
        .map((e) => JSON.stringify(e).slice(0, 200))
        .join(' | '),
    );
    return report;
  } finally {
    if (gateway) await stopGroup(gateway);
    await stopGroup(serve, 30000);
    await judge.close();
  }
}
