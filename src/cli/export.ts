// openclaw-rl export --data DIR [--out FILE] [--kind main|side|all]
//
//   openclaw-rl export --data openclaw-rl-data > turns.jsonl
//   openclaw-rl export --data openclaw-rl-data --kind main --out main-turns.jsonl
//
// Writes every recorded turn as one JSON line: session id, kind, messages, prompt ids, completion
// ids, both log-probs, policy version, next state and closure reason (store/records.ts ExportLine).
// Safe while the server runs (SQLite WAL); --out is written to a temporary file and renamed.

import { once } from 'node:events';
import { createWriteStream, existsSync, renameSync, rmSync } from 'node:fs';
import { openPrivateFile } from '../private-files.js';
import { join } from 'node:path';
import { openStore, STORE_FILE } from '../store/store.js';
import { CliError, parseFlags, stringFlag } from './args.js';

const USAGE = `usage: openclaw-rl export --data DIR [--out FILE] [--kind main|side|all]

options:
  --out FILE    write here instead of stdout
  --kind K      main, side or all (default all)`;

export async function runExport(argv: string[]): Promise<number> {
  const v = parseFlags(argv, { data: { type: 'string' }, out: { type: 'string' }, kind: { type: 'string' } }, USAGE);
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const dir = stringFlag(v, 'data', USAGE);
  if (!existsSync(join(dir, STORE_FILE)))
    throw new CliError(`no store in ${dir} (expected ${join(dir, STORE_FILE)}); pass the --data folder given to serve`);
  const kindFlag = (v.kind as string | undefined) ?? 'all';
  if (!['main', 'side', 'all'].includes(kindFlag))
    throw new CliError(`--kind must be main, side or all, got "${kindFlag}"`);
  const store = openStore({ dir, recoverQueue: false });
  const out = v.out as string | undefined;
  const tmp = out ? `${out}.tmp-${process.pid}` : undefined;
  // The export holds every conversation: 0600 like the store, whatever the umask.
  const sink = tmp ? createWriteStream('', { fd: openPrivateFile(tmp, 'w') }) : process.stdout;
  let count = 0;
  try {
    for (const line of store.exportLines(kindFlag === 'all' ? null : (kindFlag as 'main' | 'side'))) {
      if (!sink.write(`${JSON.stringify(line)}\n`)) await once(sink, 'drain');
      count++;
    }
    if (tmp) {
      await new Promise<void>((resolve, reject) =>
        (sink as ReturnType<typeof createWriteStream>).end((e?: Error | null) => (e ? reject(e) : resolve())),
      );
      renameSync(tmp, out!);
    }
  } catch (e) {
    if (tmp) rmSync(tmp, { force: true });
    throw e;
  } finally {
    store.close();
  }
  console.error(`exported ${count} turn(s)${out ? ` to ${out}` : ''}`);
  return 0;
}
