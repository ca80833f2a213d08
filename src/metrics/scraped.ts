// Metric families read at scrape time (prom-client's collect()) from a source that already keeps
// the number (the store, the judge's counters, the trainer's last batch, the engine), so nothing
// is counted twice. A source read by several families is read once per scrape (PerScrape).

import { Counter, Gauge, type Registry } from 'prom-client';

export type Labels = Record<string, string>;

/** One value (a family without labels) or one per label set; null: the source has nothing now. */
export type Reading = number | readonly { labels: Labels; value: number }[] | null;

export interface FamilySpec {
  name: string;
  help: string;
  labelNames?: readonly string[];
}

/** A counter whose total the source keeps (it only grows while the process runs). */
export function scrapedCounter(registry: Registry, spec: FamilySpec, read: () => Reading): void {
  new Counter({
    name: spec.name,
    help: spec.help,
    labelNames: spec.labelNames ?? [],
    registers: [registry],
    collect() {
      this.reset();
      forEach(read(), (labels, value) => {
        if (Number.isFinite(value) && value >= 0) this.inc(labels, value);
      });
    },
  });
}

/** A gauge read from the source; a family without labels reads NaN while the source has no value. */
export function scrapedGauge(registry: Registry, spec: FamilySpec, read: () => Reading): void {
  const labelled = (spec.labelNames ?? []).length > 0;
  new Gauge({
    name: spec.name,
    help: spec.help,
    labelNames: spec.labelNames ?? [],
    registers: [registry],
    collect() {
      this.reset();
      const reading = read();
      if (reading === null && !labelled) this.set(Number.NaN);
      forEach(reading, (labels, value) => this.set(labels, value));
    },
  });
}

function forEach(reading: Reading, f: (labels: Labels, value: number) => void): void {
  if (reading === null) return;
  if (typeof reading === 'number') f({}, reading);
  else for (const { labels, value } of reading) f(labels, value);
}

/** A label set per key of `values`, under one label name. */
export function byLabel(name: string, values: Readonly<Record<string, number>>): Reading {
  return Object.entries(values).map(([key, value]) => ({ labels: { [name]: key }, value }));
}

/** A source read at most once per scrape: the first family to ask reads it, the others share it. */
export class PerScrape<T> {
  private cached: { value: T } | null = null;
  private scraping = 0;

  constructor(private readonly read: () => T) {}

  get(): T {
    if (this.scraping === 0) return this.read();
    this.cached ??= { value: this.read() };
    return this.cached.value;
  }

  async during<R>(scrape: () => Promise<R>): Promise<R> {
    if (this.scraping++ === 0) this.cached = null;
    try {
      return await scrape();
    } finally {
      if (--this.scraping === 0) this.cached = null;
    }
  }
}
