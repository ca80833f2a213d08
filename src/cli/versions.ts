// openclaw-rl versions list|rollback N --data DIR
//
//   openclaw-rl versions list --data openclaw-rl-data
//   openclaw-rl versions rollback 3 --data openclaw-rl-data
//
// `list` reads the store (safe while serve runs). `rollback` writes a request row into the store:
// a serve learning on DIR (DIR/learning.pid names a live process) applies it between two batches,
// and this command waits for its answer; with no serve running, the next start applies it. Either
// way the chosen version's weights are published as a new version (docs/learning.md).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { openStore, STORE_FILE, type Store } from '../store/store.js';
import type { RollbackRequest, VersionSummary } from '../store/versions.js';
import { CliError, numberFlag, parseFlags, stringFlag } from './args.js';
import { servePid } from './versions-marker.js';

const USAGE = `usage: openclaw-rl versions list --data DIR [--json]
       openclaw-rl versions rollback N --data DIR [--wait-seconds S]

list       every published version, newest first: time, optimizer step, source, the serving one (*),
           the judge's mean score on its turns, its judged and served turns, whether its weights are kept
rollback   publish version N's weights as a new version. A serve running on DIR applies it between
           two batches (this waits up to S seconds for it, default 600); otherwise its next start does

options:
  --json             list: one JSON object per version instead of the table
  --wait-seconds S   rollback: how long to wait for a running serve's answer`;

const FLAGS = { data: { type: 'string' }, json: { type: 'boolean' }, 'wait-seconds': { type: 'string' } } as const;

export async function runVersions(argv: string[]): Promise<number> {
  const [action, ...rest] = argv;
  if (action === undefined || action === '--help' || action === '-h') {
    console.log(USAGE);
    return action === undefined ? 2 : 0;
  }
  if (action !== 'list' && action !== 'rollback')
    throw new CliError(`unknown versions command "${action}": use list or rollback\n\n${USAGE}`);
  const positional = action === 'rollback' && rest[0] !== undefined && !rest[0].startsWith('-') ? rest.shift() : null;
  const v = parseFlags(rest, FLAGS, USAGE);
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const dir = stringFlag(v, 'data', USAGE);
  if (!existsSync(join(dir, STORE_FILE)))
    throw new CliError(`no store in ${dir} (expected ${join(dir, STORE_FILE)}); pass the --data folder given to serve`);
  if (action === 'rollback') {
    const target = Number(positional);
    if (positional === null || !(Number.isInteger(target) && target >= 0))
      throw new CliError(`versions rollback needs a version number (see versions list), got ${positional ?? 'none'}`);
    const waitSeconds = numberFlag(v, 'wait-seconds', { min: 0 }) ?? 600;
    return rollback(dir, target, waitSeconds);
  }
  const store = openStore({ dir, recoverQueue: false });
  try {
    const versions = store.versions.list(store.versions.maxVersion());
    if (v.json) for (const s of versions) console.log(JSON.stringify(s));
    else console.log(versionsTable(versions));
  } finally {
    store.close();
  }
  return 0;
}

async function rollback(dir: string, target: number, waitSeconds: number): Promise<number> {
  const store = openStore({ dir, recoverQueue: false });
  try {
    refuseEarly(store, target);
    const id = store.versions.request(target, 'cli');
    const pid = servePid(dir);
    if (pid === null) {
      console.log(
        `no serve is learning on ${dir}: the rollback to version ${target} (request ${id}) is applied at its next start`,
      );
      return 0;
    }
    console.error(`serve (pid ${pid}) applies the rollback to version ${target} between two batches; waiting...`);
    const r = await answerOf(store, id, waitSeconds * 1000);
    if (r.status === 'done') {
      console.log(`rolled back: version ${target}'s weights now serve as version ${r.publishedVersion}`);
      return 0;
    }
    if (r.status === 'refused') throw new Error(`rollback refused: ${r.message}`);
    console.log(
      `request ${id} is still pending after ${waitSeconds} s (a batch in progress?); serve applies it when it can`,
    );
    return 0;
  } finally {
    store.close();
  }
}

/** The refusals that the store alone can tell: no such version, weights gone, serving already. */
function refuseEarly(store: Store, target: number): void {
  const newest = store.versions.maxVersion();
  const v = store.versions.list(newest).find((s) => s.version === target);
  if (!v) throw new CliError(`no version ${target} was recorded in this store (versions list shows those that were)`);
  if (target === newest) throw new CliError(`version ${target} is the newest: it is serving already`);
  if (!v.weightsKept)
    throw new CliError(
      `the weights of version ${target} are no longer kept; choose a version listed with weights (raise --keep-versions for the future)`,
    );
}

async function answerOf(store: Store, id: number, waitMs: number): Promise<RollbackRequest> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const r = store.versions.requestById(id)!;
    if (r.status !== 'pending' || Date.now() >= deadline) return r;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The `versions list` table: one line per version, newest first. */
export function versionsTable(versions: readonly VersionSummary[]): string {
  const header = ['', 'version', 'published', 'step', 'source', 'score', 'judged', 'turns', 'weights', 'guard'];
  const rows = versions.map((v) => [
    v.serving ? '*' : '',
    String(v.version),
    v.version === 0 ? '-' : new Date(v.publishedAt).toISOString().replace('T', ' ').slice(0, 19),
    String(v.step),
    v.version === 0 ? 'base' : v.source === 'rollback' ? `rollback to ${v.restores} (${v.requestedBy})` : v.source,
    v.scoreMean === null ? '-' : (v.scoreMean >= 0 ? '+' : '') + v.scoreMean.toFixed(2),
    String(v.judged),
    String(v.turns),
    v.weightsKept ? 'kept' : 'gone',
    v.guard ? (v.guard.decision === 'rolled_back' ? 'rolled back' : 'kept') : '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
