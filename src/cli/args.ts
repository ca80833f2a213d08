// Flag parsing shared by the commands: node's parseArgs plus typed number conversion and
// errors that say which flag was wrong.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { type KvCacheSetting, parseKvCacheSetting } from '../engine/local/kv-cache-budget.js';
import { parsePrecision, type PrecisionSetting } from '../engine/local/precision.js';

export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  usage: string,
) {
  try {
    const parsed = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: false,
      strict: true,
    });
    return parsed.values as Record<string, string | boolean | undefined>;
  } catch (e) {
    throw new CliError(`${(e as Error).message}\n\n${usage}`);
  }
}

export function numberFlag(
  values: Record<string, unknown>,
  name: string,
  opts: { integer?: boolean; min?: number; max?: number } = {},
): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  const bad =
    !Number.isFinite(n) ||
    (opts.integer && !Number.isInteger(n)) ||
    (opts.min !== undefined && n < opts.min) ||
    (opts.max !== undefined && n > opts.max);
  if (bad) {
    const range = [
      opts.integer ? 'an integer' : 'a number',
      opts.min !== undefined ? `>= ${opts.min}` : '',
      opts.max !== undefined ? `<= ${opts.max}` : '',
    ]
      .filter(Boolean)
      .join(' ');
    throw new CliError(`--${name} must be ${range}, got "${String(raw)}"`);
  }
  return n;
}

/** --precision fp32|bf16|int8|auto (default auto), checked with a clear error. */
export function precisionFlag(values: Record<string, unknown>): PrecisionSetting {
  const raw = values.precision;
  if (raw === undefined) return 'auto';
  try {
    return parsePrecision(String(raw));
  } catch {
    throw new CliError(`--precision must be fp32, bf16, int8 or auto, got "${String(raw)}"`);
  }
}

/** --kv-cache-dtype auto|f32|bf16|int8 (default auto), checked with a clear error. */
export function kvCacheDtypeFlag(values: Record<string, unknown>): KvCacheSetting {
  const raw = values['kv-cache-dtype'];
  if (raw === undefined) return 'auto';
  try {
    return parseKvCacheSetting(String(raw));
  } catch {
    throw new CliError(`--kv-cache-dtype must be auto, f32, bf16 or int8, got "${String(raw)}"`);
  }
}

/** The --kv-cache-dtype help lines of serve and generate. */
export const KV_CACHE_DTYPE_USAGE = `--kv-cache-dtype D  the sequences' keys and values: bf16, int8 (1.125 bytes a value, about half
                     bf16's: faster decode at long contexts, more prompts in the prefix cache, for
                     a larger rounding error), f32, or auto (default: f32 at fp32, else bf16)`;

/** The --precision help line of train. */
export const PRECISION_USAGE =
  '--precision P       fp32, bf16 (GEMMs from bf16-rounded inputs) or auto (default: bf16 with bf16 instructions)';

/** The --precision help line of generate: train's, and int8. */
export const SERVE_PRECISION_USAGE = `${PRECISION_USAGE}
                     int8: as bf16, but decode steps read int8 copies of the weights (auto's
                     choice where the native kernels also have AVX512-VNNI)`;

export function stringFlag(values: Record<string, unknown>, name: string, usage: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.length === 0) throw new CliError(`--${name} is required\n\n${usage}`);
  return v;
}
