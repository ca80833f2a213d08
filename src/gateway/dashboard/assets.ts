// The dashboard's static files: the page, its script and style (static/ beside this folder's
// sources, shipped in the package) and uPlot's browser build from its npm package. Read once, on
// first request, and served with headers that keep the page to its own origin: no third-party
// host, no framing, no referrer.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface Asset {
  contentType: string;
  body: Buffer;
}

// Compiled to dist/src/gateway/dashboard/; the sources' static/ folder sits at the same depth under src/.
const STATIC = new URL('../../../../src/gateway/dashboard/static/', import.meta.url);
const require = createRequire(import.meta.url);

const FILES: Record<string, { path: () => string; contentType: string }> = {
  'index.html': { path: () => fileURLToPath(new URL('index.html', STATIC)), contentType: 'text/html; charset=utf-8' },
  'app.js': { path: () => fileURLToPath(new URL('app.js', STATIC)), contentType: 'text/javascript; charset=utf-8' },
  'common.js': {
    path: () => fileURLToPath(new URL('common.js', STATIC)),
    contentType: 'text/javascript; charset=utf-8',
  },
  'sessions.js': {
    path: () => fileURLToPath(new URL('sessions.js', STATIC)),
    contentType: 'text/javascript; charset=utf-8',
  },
  'app.css': { path: () => fileURLToPath(new URL('app.css', STATIC)), contentType: 'text/css; charset=utf-8' },
  'uPlot.iife.min.js': {
    path: () => require.resolve('uplot/dist/uPlot.iife.min.js'),
    contentType: 'text/javascript; charset=utf-8',
  },
  'uPlot.min.css': { path: () => require.resolve('uplot/dist/uPlot.min.css'), contentType: 'text/css; charset=utf-8' },
};

const cache = new Map<string, Asset>();

/** The named asset, or undefined when the dashboard has no such file. */
export function dashboardAsset(name: string): Asset | undefined {
  const file = FILES[name];
  if (!file) return undefined;
  let asset = cache.get(name);
  if (!asset) {
    asset = { contentType: file.contentType, body: readFileSync(file.path()) };
    cache.set(name, asset);
  }
  return asset;
}

/** Headers of every dashboard file: same-origin only, never framed, never cached stale. */
export const ASSET_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};
