// Logs: one JSON object per line and per event. Conversation text appears only when the
// operator asked for it (--log-content); ids, counts and timings always do.

export interface Logger {
  readonly logContent: boolean;
  event(name: string, fields?: Record<string, unknown>): void;
}

export function jsonLogger(write: (line: string) => void, logContent = false): Logger {
  return {
    logContent,
    event(name, fields = {}) {
      write(`${JSON.stringify({ ts: new Date().toISOString(), event: name, ...fields })}\n`);
    },
  };
}

export const silentLogger: Logger = { logContent: false, event() {} };

/** A logger that keeps events in memory (tests). */
export function memoryLogger(logContent = false): Logger & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return {
    logContent,
    lines,
    event(name, fields = {}) {
      lines.push({ event: name, ...fields });
    },
  };
}
