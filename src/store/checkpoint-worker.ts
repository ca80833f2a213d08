// The background checkpointer's thread: its own connection to the store file, copying committed
// WAL pages into the database (PASSIVE: never waits for, nor blocks, the serving connection).

import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import type { CheckpointWorkerData, FromCheckpointer } from './checkpointer.js';

const port = parentPort!;
const { path, everyMs } = workerData as CheckpointWorkerData;
const send = (m: FromCheckpointer) => port.postMessage(m);

let db: Database.Database;
try {
  db = new Database(path, { fileMustExist: true });
} catch (e) {
  send({ type: 'failed', message: (e as Error).message });
  process.exit(1);
}

const checkpoint = () => {
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    if (row && row.checkpointed > 0) send({ type: 'checkpointed', pages: row.checkpointed, walPages: row.log });
  } catch (e) {
    send({ type: 'failed', message: (e as Error).message });
    stop();
  }
};
const timer = setInterval(checkpoint, everyMs);
const stop = () => {
  clearInterval(timer);
  if (db.open) db.close();
  port.close();
};
port.on('message', (m: 'stop') => {
  if (m === 'stop') stop();
});
