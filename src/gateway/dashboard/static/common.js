// What the dashboard's scripts share: the admin key of this tab, calls to this server with it,
// and building DOM from text (textContent only: nothing from the server is parsed as HTML).

const KEY = 'openclaw-rl-admin-key';

export const $ = (id) => document.getElementById(id);

/** The admin key of this tab, or null. */
export function adminKey() {
  return sessionStorage.getItem(KEY);
}

export function setAdminKey(key) {
  if (key === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, key);
}

/** A call to this server with the admin key. Resolves to { status, body }; a 401 signs the page out. */
export async function api(path, init = {}) {
  const res = await fetch(path, {
    ...init,
    headers: { ...(init.headers ?? {}), authorization: `Bearer ${adminKey()}` },
    cache: 'no-store',
  });
  const type = res.headers.get('content-type') ?? '';
  const body = type.includes('application/json') ? await res.json() : await res.text();
  if (res.status === 401) {
    window.dispatchEvent(new Event('dashboard:unauthorized'));
    throw new Error('unauthorized');
  }
  return { status: res.status, body };
}

/** An element with text content and an optional class. */
export function el(tag, text = '', className = '') {
  const e = document.createElement(tag);
  if (text !== '') e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

export function signed(x, digits = 2) {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  return `${x > 0 ? '+' : ''}${Number(x).toFixed(digits)}`;
}

/** A table cell with a signed score, green above 0 and red below. */
export function scoreCell(x) {
  return el('td', signed(x), x > 0 ? 'pos' : x < 0 ? 'neg' : '');
}

export function when(ms) {
  return ms ? new Date(ms).toLocaleString() : '–';
}

export function errorMessage(body) {
  return body?.error?.message ?? (typeof body === 'string' ? body : JSON.stringify(body));
}
