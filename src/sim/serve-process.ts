// `openclaw-rl serve` as a child process, started and stopped by the simulation exactly as a
// user would run it: flags only, its URL read from the `listening` log line, every JSON log line
// kept (the benchmark reads `batch_trained` for the wall time of each step).

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));

export type LogLine = Record<string, unknown> & { event?: string };

export interface ServeProcess {
  /** The API root, e.g. http://127.0.0.1:PORT/v1. */
  url: string;
  /** The server root, for /admin routes. */
  root: string;
  lines: LogLine[];
  /** Called for every log line from now on. */
  onLine(listener: (line: LogLine) => void): void;
  stop(): Promise<void>;
}

export async function startServe(args: readonly string[], startTimeoutMs = 300_000): Promise<ServeProcess> {
  const child: ChildProcess = spawn(
    process.execPath,
    [CLI, 'serve', '--port', '0', '--progress-seconds', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: LogLine[] = [];
  const listeners: ((line: LogLine) => void)[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-8000);
  });
  let buffer = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffer += d.toString();
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        line = { event: 'unparsed', text };
      }
      lines.push(line);
      for (const l of listeners) l(line);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start within ${startTimeoutMs} ms; stderr:\n${stderr}`));
    }, startTimeoutMs);
    listeners.push((line) => {
      if (line.event === 'listening') {
        clearTimeout(timer);
        resolve(String(line.url));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with code ${code} before listening; stderr:\n${stderr}`));
    });
  });
  return {
    url,
    root: url.replace(/\/v1$/, ''),
    lines,
    onLine: (listener) => {
      listeners.push(listener);
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
