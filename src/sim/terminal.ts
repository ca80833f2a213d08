// Terminal output for the simulation's commands: progress bars, and a status line kept at the
// bottom of a terminal (redrawn in place) while event lines scroll above it. Off a terminal the
// status line is printed only when asked, so logs stay short.

export function bar(fraction: number, width = 24): string {
  const f = Math.min(1, Math.max(0, fraction));
  const full = Math.floor(f * width);
  const part = ' ▏▎▍▌▋▊▉'[Math.floor((f * width - full) * 8)] ?? '';
  return `${'█'.repeat(full)}${full < width ? part : ''}`.padEnd(width, '·');
}

export class Console {
  private status = '';
  private readonly tty: boolean;

  constructor(private readonly out: NodeJS.WriteStream = process.stdout) {
    this.tty = out.isTTY === true;
  }

  /** A line that stays in the scrollback. */
  line(text: string): void {
    if (this.tty && this.status) this.out.write('\r\x1b[K');
    this.out.write(`${text}\n`);
    if (this.tty && this.status) this.out.write(this.clip(this.status));
  }

  /** The bottom line; off a terminal printed only when `important`. */
  setStatus(text: string, important = false): void {
    this.status = text;
    if (this.tty) this.out.write(`\r\x1b[K${this.clip(text)}`);
    else if (important) this.out.write(`${text}\n`);
  }

  /** Ends the status line (it stays visible). */
  endStatus(): void {
    if (this.tty && this.status) this.out.write('\n');
    this.status = '';
  }

  /** Fits the terminal's width; colors (escape codes, no width) are dropped from a line that must be cut. */
  private clip(text: string): string {
    const width = (this.out.columns ?? 100) - 1;
    // biome-ignore lint/suspicious/noControlCharactersInRegex: strips the terminal's escape sequences
    const plain = text.replace(/\x1b\[[0-9;]*m/g, '');
    return plain.length > width ? `${plain.slice(0, width - 1)}…` : text;
  }
}

/** Color when writing to a terminal, plain text otherwise. */
export function paint(out: NodeJS.WriteStream = process.stdout) {
  const on = out.isTTY === true && !process.env.NO_COLOR;
  const wrap = (code: number) => (s: string) => (on ? `\x1b[${code}m${s}\x1b[0m` : s);
  return {
    dim: wrap(2),
    bold: wrap(1),
    red: wrap(31),
    green: wrap(32),
    yellow: wrap(33),
    blue: wrap(34),
    magenta: wrap(35),
    cyan: wrap(36),
  };
}
