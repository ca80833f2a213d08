// A strict parser of Prometheus' text exposition format (version 0.0.4), written for the tests
// from the format's description, independent of prom-client: every line must be a HELP, a TYPE,
// a comment, blank, or a sample; names, label syntax, escapes and numbers are checked; each
// sample must belong to a family with a TYPE given before it; a sample is never repeated.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The sample's own name (`x_bucket`, `x_sum`...). */
  name: string;
  /** The family it belongs to (`x`). */
  family: string;
  labels: Record<string, string>;
  value: number;
  timestampMs: number | null;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const FLOAT = /^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)$/;

export class ExpositionError extends Error {
  constructor(line: number, text: string, why: string) {
    super(`line ${line}: ${why}: ${JSON.stringify(text)}`);
  }
}

/** A float as the format spells it: decimals, exponents, and exactly +Inf, -Inf and NaN. */
export function parseValue(text: string): number | undefined {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN') return Number.NaN;
  return FLOAT.test(text) ? Number(text) : undefined;
}

function unescapeText(text: string, quotes: boolean): string | undefined {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    if (next === '\\') out += '\\';
    else if (next === 'n') out += '\n';
    else if (next === '"' && quotes) out += '"';
    else return undefined;
  }
  return out;
}

/** The family a sample name belongs to, given the families whose TYPE was seen. */
function familyOf(name: string, types: Map<string, MetricType>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return undefined;
}

function parseLabels(text: string, fail: (why: string) => never): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let s = text.slice(1); // after '{'
  for (;;) {
    if (s.startsWith('}')) return { labels, rest: s.slice(1) };
    const name = LABEL_NAME.exec(s)?.[0];
    if (!name) fail('bad label name');
    if (name in labels) fail(`label ${name} repeated`);
    s = s.slice(name.length);
    if (!s.startsWith('="')) fail(`label ${name} without ="`);
    s = s.slice(2);
    let end = 0;
    while (end < s.length && s[end] !== '"') end += s[end] === '\\' ? 2 : 1;
    if (end >= s.length) fail(`unterminated value of label ${name}`);
    const value = unescapeText(s.slice(0, end), true);
    if (value === undefined) fail(`bad escape in label ${name}`);
    labels[name] = value;
    s = s.slice(end + 1);
    if (s.startsWith(',')) s = s.slice(1);
    else if (!s.startsWith('}')) fail('expected , or } after a label');
  }
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const types = new Map<string, MetricType>();
  const seen = new Set<string>();
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') throw new ExpositionError(lines.length, lines.at(-1)!, 'no final newline');
  lines.forEach((line, i) => {
    const fail: (why: string) => never = (why) => {
      throw new ExpositionError(i + 1, line, why);
    };
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^#[ \t]+(HELP|TYPE)[ \t]+([^ \t]+)(?:[ \t]+(.*))?$/.exec(line);
      if (!m) {
        if (/^#[ \t]*(HELP|TYPE)\b/.test(line)) fail('malformed HELP or TYPE');
        return; // a plain comment
      }
      const [, keyword, name, rest] = m as unknown as [string, string, string, string | undefined];
      if (METRIC_NAME.exec(name)?.[0] !== name) fail('bad metric name');
      const family = families.get(name) ?? { name, type: 'untyped' as MetricType, help: null, samples: [] };
      if (keyword === 'HELP') {
        if (family.help !== null) fail('second HELP');
        const help = unescapeText(rest ?? '', false);
        if (help === undefined) fail('bad escape in HELP');
        family.help = help;
      } else {
        if (types.has(name)) fail('second TYPE');
        if (family.samples.length > 0) fail('TYPE after the samples');
        if (!TYPES.has(rest as MetricType)) fail('unknown type');
        family.type = rest as MetricType;
        types.set(name, family.type);
      }
      families.set(name, family);
      return;
    }
    const name = METRIC_NAME.exec(line)?.[0];
    if (!name) fail('not a sample');
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, fail));
    const fields = rest.trim().split(/[ \t]+/);
    if (!/^[ \t]/.test(rest) || fields.length < 1 || fields.length > 2) fail('expected a value and maybe a timestamp');
    const value = parseValue(fields[0]!);
    if (value === undefined) fail('bad value');
    const timestamp = fields[1];
    if (timestamp !== undefined && !/^-?\d+$/.test(timestamp)) fail('bad timestamp');
    const family = familyOf(name, types);
    if (family === undefined) fail(`sample of ${name} has no TYPE before it`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) fail('sample repeated');
    seen.add(key);
    families.get(family)!.samples.push({
      name,
      family,
      labels,
      value,
      timestampMs: timestamp === undefined ? null : Number(timestamp),
    });
  });
  return families;
}

/**
 * Checks every histogram: per label set, buckets with distinct `le`, cumulative counts that never
 * decrease, a +Inf bucket equal to _count, and a _sum. Returns the problems found (none: []).
 */
export function histogramProblems(families: Map<string, Family>): string[] {
  const problems: string[] = [];
  for (const f of families.values()) {
    if (f.type !== 'histogram') continue;
    const series = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
    for (const s of f.samples) {
      const { le, ...rest } = s.labels;
      const key = JSON.stringify(Object.entries(rest).sort());
      const one = series.get(key) ?? { buckets: [] };
      series.set(key, one);
      if (s.name === `${f.name}_bucket`) {
        const bound = le === undefined ? undefined : parseValue(le);
        if (bound === undefined || Number.isNaN(bound)) problems.push(`${f.name}${key}: bucket with le=${le}`);
        else one.buckets.push([bound, s.value]);
      } else if (s.name === `${f.name}_sum`) one.sum = s.value;
      else if (s.name === `${f.name}_count`) one.count = s.value;
      else problems.push(`${f.name}: stray sample ${s.name}`);
    }
    for (const [key, s] of series) {
      const at = `${f.name}${key}`;
      const sorted = [...s.buckets].sort((a, b) => a[0] - b[0]);
      if (new Set(sorted.map((b) => b[0])).size !== sorted.length) problems.push(`${at}: repeated le`);
      for (let i = 1; i < sorted.length; i++)
        if (sorted[i]![1] < sorted[i - 1]![1]) problems.push(`${at}: bucket le=${sorted[i]![0]} decreases`);
      const inf = sorted.at(-1);
      if (!inf || inf[0] !== Number.POSITIVE_INFINITY) problems.push(`${at}: no +Inf bucket`);
      else if (inf[1] !== s.count) problems.push(`${at}: +Inf bucket ${inf[1]} != count ${s.count}`);
      if (s.sum === undefined) problems.push(`${at}: no _sum`);
    }
  }
  return problems;
}

/** The value of the sample with exactly these labels (the family's own name unless `name` is given). */
export function sampleValue(
  families: Map<string, Family>,
  family: string,
  labels: Record<string, string> = {},
  name = family,
): number | undefined {
  const want = JSON.stringify(Object.entries(labels).sort());
  return families
    .get(family)
    ?.samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want)?.value;
}

/** The sum of a family's samples whose labels include `labels` (name: the family's own unless given). */
export function sumOf(
  families: Map<string, Family>,
  family: string,
  labels: Record<string, string> = {},
  name = family,
): number {
  let sum = 0;
  for (const s of families.get(family)?.samples ?? [])
    if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  return sum;
}
