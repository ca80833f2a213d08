// The dashboard page: signs in with the admin key (kept in this tab's sessionStorage, sent only as
// an Authorization header to this origin), then polls the admin routes every few seconds and
// draws the charts (uPlot, served by this server), the cards and the versions; sessions.js draws
// the sessions. Text from the server is only ever put in the page as text, never as HTML.

import { $, adminKey, api, el, errorMessage, scoreCell, setAdminKey, signed, when } from './common.js';
import { refreshSessions } from './sessions.js';

const POLL_MS = 3000;

// ---- charts ----

const charts = new Map();
const COLORS = ['#2f6fde', '#c4321f', '#1a7f37', '#b7791f', '#7c3aed'];

const STEP_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

/** The y range of values that are never negative (counts, rates): from 0, with headroom. */
const COUNTS = (_u, _min, max) => [0, Math.max(1, Math.ceil(max * 1.1))];

/** A y range that stays readable when every value is equal. */
function yRange(_u, min, max) {
  return min === max ? [min - 1, max + 1] : [min, max];
}

/** An x range that centres a lone point, `pad` either side (uPlot would widen it by years on a time axis). */
function xRange(pad) {
  return (u, min, max) => (u.data[0].length === 1 ? [u.data[0][0] - pad, u.data[0][0] + pad] : [min, max]);
}

/** Draws (or redraws) the chart in element `id`: data = [xs, ...ys], one label per y series. */
function chart(id, labels, data, { time = false, points = false, y = null, stepped = false } = {}) {
  const box = $(id);
  box.dataset.points = String(data[0].length);
  if (data[0].length === 0) return;
  let plot = charts.get(id);
  if (!plot) {
    box.textContent = '';
    plot = new window.uPlot(
      {
        width: Math.max(300, box.clientWidth),
        height: 180,
        scales: { x: { time, range: xRange(time ? 300 : 1) }, y: { range: y ?? yRange } },
        axes: [time ? {} : { incrs: STEP_TICKS }, {}],
        legend: { live: false },
        series: [
          { label: time ? 'time' : 'step' },
          ...labels.map((label, i) => ({
            label,
            stroke: COLORS[i % COLORS.length],
            width: 2,
            spanGaps: true,
            points: { show: points || data[0].length < 30 },
            ...(stepped ? { paths: window.uPlot.paths.stepped({ align: 1 }) } : {}),
          })),
        ],
      },
      data,
      box,
    );
    charts.set(id, plot);
  } else plot.setData(data);
}

// ---- state and polling ----

const steps = [];
const live = { t: [], closed: [], judging: [], samples: [], perMinute: [], lastTurns: null, lastAt: null };
let timer = null;

async function poll() {
  try {
    const [status] = await Promise.all([
      api('/admin/status'),
      api(`/admin/steps?after=${steps.at(-1)?.step ?? 0}`).then(({ status: code, body }) => {
        if (code === 200) steps.push(...body.steps);
      }),
    ]);
    renderStatus(status.body);
    renderSteps();
    await Promise.all([refreshVersions(status.body), refreshSessions()]);
    $('error').textContent = '';
  } catch (e) {
    if (e.message !== 'unauthorized') $('error').textContent = `Update failed: ${e.message}`;
  }
  if (adminKey()) timer = setTimeout(poll, POLL_MS);
}

function renderStatus(s) {
  const learning = s.learning !== 'disabled';
  $('headline').textContent =
    `version ${s.version} · ${learning ? `step ${s.steps} · trainer ${s.trainer.state}` : 'learning off'}` +
    ` · updated ${new Date().toLocaleTimeString()}`;
  const recent = s.judge?.recent;
  const cards = [
    ['Serving version', s.version],
    ['Training steps', s.steps],
    ['Trainer', learning ? s.trainer.state : 'off', s.trainer?.state === 'failed'],
    ['Turns main / side', s.turns ? `${s.turns.main} / ${s.turns.side}` : '–'],
    ['Open main turns', s.turns?.open ?? '–'],
    ['Judged / skipped', s.judge ? `${s.judge.judged} / ${s.judge.skipped}` : '–'],
    ['Reward, last 100', recent?.turns ? signed(recent.scoreMean) : '–'],
    ['Agreement, last 100', recent?.agreementMean == null ? '–' : `${Math.round(recent.agreementMean * 100)}%`],
    ['Samples queued / batch', s.queues ? `${s.queues.samples} / ${s.batchSize}` : '–'],
    ['Turns waiting for judge', s.queues ? s.queues.closedTurns + s.queues.judging : '–'],
    ['Judge', s.judge?.health?.state ?? '–', s.judge?.health?.state === 'failing'],
    ['Requests in flight', s.inflight],
  ];
  $('cards').replaceChildren(
    ...cards.map(([label, value, bad]) => {
      const card = el('div', '', bad ? 'card bad' : 'card');
      card.append(el('div', label, 'label'), el('div', value ?? '–', 'value'));
      return card;
    }),
  );
  if (!s.queues || !s.turns) return;
  const now = Date.now() / 1000;
  const turns = s.turns.main + s.turns.side;
  live.t.push(now);
  live.closed.push(s.queues.closedTurns);
  live.judging.push(s.queues.judging);
  live.samples.push(s.queues.samples);
  live.perMinute.push(live.lastTurns === null ? null : ((turns - live.lastTurns) * 60) / (now - live.lastAt));
  live.lastTurns = turns;
  live.lastAt = now;
  if (live.t.length > 600) for (const a of [live.t, live.closed, live.judging, live.samples, live.perMinute]) a.shift();
  chart(
    'chart-queues',
    ['closed turns', 'judging', 'samples queued'],
    [live.t, live.closed, live.judging, live.samples],
    { time: true, y: COUNTS },
  );
  chart('chart-throughput', ['turns/min'], [live.t, live.perMinute], { time: true, y: COUNTS });
}

function renderSteps() {
  const x = steps.map((s) => s.step);
  const col = (f) => steps.map(f);
  chart('chart-reward', ['reward mean'], [x, col((s) => s.rewardMean)], { y: [-1, 1] });
  chart('chart-agreement', ['agreement'], [x, col((s) => s.agreementMean)], { y: [0, 1] });
  chart(
    'chart-hints',
    ['accepted', 'rejected', 'trained with hint'],
    [x, col((s) => s.hintsAccepted), col((s) => s.hintsRejected), col((s) => s.hints)],
    { y: COUNTS },
  );
  chart(
    'chart-samples',
    ['samples', 'queued after', 'stale dropped'],
    [x, col((s) => s.samples), col((s) => s.samplesQueued), col((s) => s.staleDropped)],
    { y: COUNTS },
  );
  chart('chart-tokens', ['tokens/s'], [x, col((s) => s.tokensPerSecond)], { y: COUNTS });
  chart('chart-loss', ['loss', 'approx KL'], [x, col((s) => s.loss), col((s) => s.approxKl)]);
}

// ---- versions ----

/** The versions: GET /admin/versions (newest first); without it (learning off, an older server), the steps'. */
async function refreshVersions(status) {
  const { status: code, body } = await api('/admin/versions');
  const listed = code === 200 && Array.isArray(body.data);
  let versions;
  if (listed) {
    versions = body.data;
    $('versions-note').textContent = '';
  } else {
    const first = new Map();
    for (const s of [...steps].reverse()) first.set(s.version, s);
    versions = [...first.values()].map((s) => ({
      version: s.version,
      publishedAt: s.at,
      step: s.step,
      source: 'train',
    }));
    $('versions-note').textContent =
      `GET /admin/versions answered ${code} (${errorMessage(body)}): the versions below are read from the ` +
      'training steps, and rollback is not available.';
  }
  // Version 0 (the base) has no publication time: it is in the table, not on the time line.
  const oldest = [...versions].reverse().filter((v) => v.publishedAt > 0);
  chart(
    'chart-versions',
    ['version', 'weights of version'],
    [oldest.map((v) => v.publishedAt / 1000), oldest.map((v) => v.version), oldest.map((v) => v.restores ?? v.version)],
    { time: true, points: true, stepped: true },
  );
  $('versions')
    .querySelector('tbody')
    .replaceChildren(...versions.map((v) => versionRow(v, listed, v.serving ?? v.version === status.version)));
}

function versionRow(v, canRollback, serving) {
  const row = el('tr', '', serving ? 'selected' : '');
  row.dataset.version = String(v.version);
  const source =
    v.source === 'rollback' ? `rollback to ${v.restores}${v.requestedBy ? ` (${v.requestedBy})` : ''}` : v.source;
  const judged = v.judged === undefined ? '–' : `${v.judged} / ${v.turns}`;
  const guard = el(
    'td',
    v.guard ? `${v.guard.decision}${v.guard.p == null ? '' : `, p ${v.guard.p.toFixed(3)}`}` : '–',
  );
  if (v.guard) guard.title = v.guard.reason;
  row.append(el('td', v.version), el('td', when(v.publishedAt)), el('td', v.step ?? '–'), el('td', source));
  row.append(el('td', judged), scoreCell(v.scoreMean), el('td', v.weightsKept === false ? 'gone' : 'kept'), guard);
  const action = el('td');
  if (serving) action.append(el('span', 'serving', 'muted'));
  else if (canRollback && v.weightsKept !== false) {
    const button = el('button', `Roll back to ${v.version}`);
    button.type = 'button';
    button.addEventListener('click', () => rollback(v.version));
    action.append(button);
  }
  row.append(action);
  return row;
}

async function rollback(version) {
  if (!confirm(`Publish version ${version}'s weights as a new version? History is kept.`)) return;
  $('versions-note').textContent = `Rolling back to version ${version}: the trainer does it between two batches…`;
  const { status, body } = await api('/admin/versions/rollback', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ version }),
  });
  $('versions-note').textContent =
    status === 200
      ? `Version ${body.version} now serves the weights of version ${body.restores}.`
      : `Rollback refused (${status}): ${errorMessage(body)}`;
}

// ---- sign in / out ----

function signOut(message = '') {
  setAdminKey(null);
  clearTimeout(timer);
  $('main').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
  $('headline').textContent = 'not signed in';
}

function start() {
  $('login').hidden = true;
  $('main').hidden = false;
  $('logout').hidden = false;
  void poll();
}

$('login').addEventListener('submit', async (event) => {
  event.preventDefault();
  setAdminKey($('key').value.trim());
  $('key').value = '';
  try {
    const { status, body } = await api('/admin/status');
    if (status !== 200) return signOut(`The server answered ${status}: ${errorMessage(body)}`);
    start();
  } catch (e) {
    if (e.message !== 'unauthorized') signOut(`Cannot reach the server: ${e.message}`);
  }
});
$('logout').addEventListener('click', () => signOut());
window.addEventListener('dashboard:unauthorized', () => signOut('The server refused the key (401): sign in again.'));
if (adminKey()) start();
