// The sessions panel: the most recently active sessions, a page at a time (Older / Newer; the page
// size is the URL's ?sessions=N, default 50), and the selected one's turns with the judge's
// verdict, its votes, the hint, the sample's advantage and (only when the server shows
// conversation text, --dashboard-content) what was said. Export and delete act on the selected one.

import { $, api, el, errorMessage, scoreCell, signed, when } from './common.js';

let selected = null;
const pageSize = Number(new URLSearchParams(location.search).get('sessions')) || 50;
/** The cursor each page starts after: [null] is the first page; Older pushes, Newer pops. */
const pages = [null];
let next = null;

export async function refreshSessions() {
  const after = pages[pages.length - 1];
  const path = `/admin/sessions?limit=${pageSize}${after ? `&after=${encodeURIComponent(after)}` : ''}`;
  const { status, body } = await api(path);
  if (status !== 200) throw new Error(`GET /admin/sessions answered ${status}: ${errorMessage(body)}`);
  if (after !== pages[pages.length - 1]) return; // the page changed meanwhile
  next = body.next;
  $('older').disabled = next === null;
  $('newer').disabled = pages.length === 1;
  $('sessions-page').textContent = `page ${pages.length}`;
  $('text-note').textContent = body.text
    ? 'Conversation text is shown (the server runs with --dashboard-content).'
    : 'Conversation text is not shown: the server leaves it out unless started with --dashboard-content.';
  $('sessions')
    .querySelector('tbody')
    .replaceChildren(...body.sessions.map(sessionRow));
  if (selected && !body.sessions.some((s) => s.id === selected)) select(null);
  if (selected) await refreshTurns();
}

function sessionRow(s) {
  const row = el('tr', '', s.id === selected ? 'selected' : '');
  row.dataset.session = s.id;
  row.append(el('td', s.id), el('td', s.source), el('td', when(s.lastSeenAt)), el('td', s.turns));
  row.append(el('td', s.mainTurns), el('td', s.judged), scoreCell(s.scoreMean), el('td', s.samples));
  row.append(el('td', s.learning ? 'yes' : 'excluded'));
  row.addEventListener('click', () => {
    select(s.id);
    void refreshTurns();
  });
  return row;
}

function select(id) {
  selected = id;
  $('session').hidden = id === null;
  $('session-id').textContent = id ?? '';
  $('session-note').textContent = '';
  for (const row of $('sessions').querySelectorAll('tbody tr'))
    row.classList.toggle('selected', row.dataset.session === id);
  if (id === null) $('turns').querySelector('tbody').replaceChildren();
}

async function refreshTurns() {
  const id = selected;
  const { status, body } = await api(`/admin/sessions/${encodeURIComponent(id)}`);
  if (id !== selected) return;
  if (status === 404) return select(null);
  if (status !== 200) throw new Error(`GET /admin/sessions/${id} answered ${status}: ${errorMessage(body)}`);
  $('turns')
    .querySelector('tbody')
    .replaceChildren(...body.turns.map((t, i) => turnRow(t, i + 1, body.text)));
}

function turnRow(t, n, withText) {
  const row = el('tr');
  row.dataset.turn = t.id;
  const v = t.verdict;
  row.append(el('td', n), el('td', t.kind), el('td', t.policyVersion), el('td', t.closureReason ?? 'open'));
  const verdict = !v
    ? el('td', t.queueStatus ?? '–')
    : v.skipped
      ? el('td', `skipped (${v.skipped})`)
      : scoreCell(v.score);
  verdict.dataset.verdict = v && !v.skipped ? String(v.score) : '';
  row.append(verdict, el('td', v?.agreement == null ? '–' : `${Math.round(v.agreement * 100)}%`));
  row.append(el('td', v ? votesText(v.votes) : '–'), hintCell(v));
  const s = t.sample;
  const advantage = s
    ? `rl ${signed(s.rlAdvantage)}${s.opdAdvantageMean === null ? '' : ` · opd ${signed(s.opdAdvantageMean)}/token`}`
    : '–';
  row.append(el('td', advantage));
  row.append(el('td', s ? sampleText(s) : (v?.noSample ?? '–')));
  row.append(conversationCell(t, withText));
  return row;
}

function sampleText(s) {
  return `${s.status}${s.trainedStep ? ` (step ${s.trainedStep})` : ''} · ${s.source}`;
}

/** Eval votes as +1 / -1 / 0, a failed vote as ✗; then the hint votes' count. */
function votesText(votes) {
  const show = (x) => (x.failure ? '✗' : x.score === null ? '·' : signed(x.score, 0) || '0');
  const evals = votes.filter((x) => x.kind === 'eval').map(show);
  const hints = votes.filter((x) => x.kind === 'hint');
  return `${evals.join(' ')}${hints.length ? ` · ${hints.length} hint vote(s)` : ''}`;
}

function hintCell(v) {
  const cell = el('td');
  if (!v) return cell;
  cell.append(el('div', v.hintAccepted ? 'accepted' : v.hintRejections ? `rejected ×${v.hintRejections}` : 'none'));
  if (typeof v.hint === 'string') cell.append(el('div', v.hint, 'msg'));
  return cell;
}

function conversationCell(t, withText) {
  const cell = el('td', '', 'text-col');
  if (!withText || !t.text) {
    cell.append(el('span', 'hidden', 'muted'));
    return cell;
  }
  for (const m of t.text.input) cell.append(message(m.role, m));
  cell.append(message('answer', t.text.response));
  if (t.text.nextState) for (const m of t.text.nextState) cell.append(message(`next ${m.role}`, m));
  return cell;
}

function message(label, m) {
  const p = el('p', '', 'msg');
  const parts =
    typeof m.content === 'string' ? m.content : (m.content ?? []).map((c) => c.text ?? `[${c.type}]`).join('');
  const calls = (m.tool_calls ?? []).map((c) => ` [calls ${c.function?.name}]`).join('');
  p.append(el('b', `${label}: `), document.createTextNode(parts + calls));
  return p;
}

$('older').addEventListener('click', () => {
  if (next === null) return;
  pages.push(next);
  void refreshSessions();
});

$('newer').addEventListener('click', () => {
  if (pages.length > 1) pages.pop();
  void refreshSessions();
});

$('export').addEventListener('click', async () => {
  const id = selected;
  const { status, body } = await api(`/admin/sessions/${encodeURIComponent(id)}/export`);
  if (status !== 200) return void ($('session-note').textContent = `Export failed (${status}): ${errorMessage(body)}`);
  const link = el('a');
  link.href = URL.createObjectURL(new Blob([JSON.stringify(body, null, 2)], { type: 'application/json' }));
  link.download = `session-${id}.json`;
  link.click();
  URL.revokeObjectURL(link.href);
  $('session-note').textContent = `Exported ${body.turns.length} turn(s).`;
});

$('delete').addEventListener('click', async () => {
  const id = selected;
  if (!confirm(`Delete session ${id} and everything recorded about it? This cannot be undone.`)) return;
  const { status, body } = await api(`/admin/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' });
  if (status !== 200) return void ($('session-note').textContent = `Not deleted (${status}): ${errorMessage(body)}`);
  select(null);
  await refreshSessions();
});
