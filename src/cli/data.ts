// openclaw-rl data delete|export --session ID --data DIR
//
//   openclaw-rl data export --session 7f3c... --data openclaw-rl-data --out session.json
//   openclaw-rl data delete --session 7f3c... --data openclaw-rl-data
//
// A person's data rights over one session, beside the admin routes (DELETE /admin/sessions/:id,
// GET /admin/sessions/:id/export) and with the same rules. Works whether or not serve runs on DIR
// (SQLite WAL lets a second connection read, and write in its own transaction). Deletion is one
// transaction, refused while a training batch in progress holds one of the session's samples.

import { closeSync, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openPrivateFile } from '../private-files.js';
import { openStore, STORE_FILE, type Store } from '../store/store.js';
import { CliError, parseFlags, stringFlag } from './args.js';

const USAGE = `usage: openclaw-rl data delete --session ID --data DIR
       openclaw-rl data export --session ID --data DIR [--out FILE]

  delete   delete the session with every turn, next state, judgment, vote and sample of it
  export   write everything recorded about the session as one JSON document (see docs/gateway.md)

options:
  --session ID  the session id (the X-Session-Id the client sent, or session_id in export's lines)
  --data DIR    the --data folder given to serve (serve may be running on it)
  --out FILE    export: write here (mode 0600) instead of stdout`;

export async function runData(argv: string[]): Promise<number> {
  const [action, ...rest] = argv;
  if (action === undefined || action === '--help' || action === '-h') {
    console.log(USAGE);
    return action === undefined ? 2 : 0;
  }
  if (action !== 'delete' && action !== 'export') throw new CliError(`unknown data action "${action}"\n\n${USAGE}`);
  const v = parseFlags(rest, { session: { type: 'string' }, data: { type: 'string' }, out: { type: 'string' } }, USAGE);
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const session = stringFlag(v, 'session', USAGE);
  const dir = stringFlag(v, 'data', USAGE);
  if (action === 'delete' && v.out !== undefined) throw new CliError(`--out is for export only\n\n${USAGE}`);
  if (!existsSync(join(dir, STORE_FILE)))
    throw new CliError(`no store in ${dir} (expected ${join(dir, STORE_FILE)}); pass the --data folder given to serve`);
  // A serving process may hold claims and batch holds: this connection leaves them as they are.
  const store = openStore({ dir, recoverQueue: false });
  try {
    return action === 'delete' ? deleteSession(store, session, dir) : exportSession(store, session, dir, v.out);
  } finally {
    store.close();
  }
}

function deleteSession(store: Store, session: string, dir: string): number {
  const turns = store.deleteSession(session); // SessionInTrainingError says why and what to do
  if (turns === null) throw new Error(`no session "${session}" in the store in ${dir}: nothing was deleted`);
  console.log(JSON.stringify({ deleted: true, session_id: session, turns }));
  console.error(`deleted session ${session}: ${turns} turn(s) with their next states, judgments and samples`);
  return 0;
}

function exportSession(store: Store, session: string, dir: string, out: unknown): number {
  const data = store.exportSession(session);
  if (data === null) throw new Error(`no session "${session}" in the store in ${dir}`);
  const text = `${JSON.stringify(data)}\n`;
  if (typeof out !== 'string') {
    process.stdout.write(text);
  } else {
    // It holds the conversation: 0600 like the store, written whole or not at all.
    const tmp = `${out}.tmp-${process.pid}`;
    try {
      const fd = openPrivateFile(tmp, 'w');
      try {
        writeFileSync(fd, text);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, out);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw e;
    }
  }
  console.error(
    `exported session ${session}: ${data.turns.length} turn(s)${typeof out === 'string' ? ` to ${out}` : ''}`,
  );
  return 0;
}
