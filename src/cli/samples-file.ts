// The offline training file of `openclaw-rl train`: one JSON object per line,
//   {"promptIds": [...], "completionIds": [...], "advantages": number | number[],
//    "rolloutLogprobs": number[] (optional)}
// Every line is checked before anything trains; the errors name the line.

import type { TrainingSample } from '../engine/types.js';

export interface ParsedSamples {
  samples: TrainingSample[];
  errors: string[];
}

export function parseSamplesJsonl(text: string, vocabSize: number, source: string): ParsedSamples {
  const samples: TrainingSample[] = [];
  const errors: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line.length === 0) return;
    const where = `${source}:${i + 1}`;
    let obj: Record<string, unknown>;
    try {
      obj = JSON.parse(line) as Record<string, unknown>;
    } catch (e) {
      errors.push(`${where}: not valid JSON (${(e as Error).message})`);
      return;
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
      errors.push(`${where}: expected a JSON object`);
      return;
    }
    const problems: string[] = [];
    const ids = (key: string): number[] => {
      const v = obj[key];
      if (!Array.isArray(v) || v.length === 0) {
        problems.push(`"${key}" must be a non-empty array of token ids`);
        return [];
      }
      const bad = v.find((x) => !(Number.isInteger(x) && x >= 0 && x < vocabSize));
      if (bad !== undefined)
        problems.push(`"${key}" holds ${JSON.stringify(bad)}, not a token id of this model (0..${vocabSize - 1})`);
      return v as number[];
    };
    const promptIds = ids('promptIds');
    const completionIds = ids('completionIds');
    const n = completionIds.length;
    let advantages: number[] = [];
    const a = obj.advantages;
    if (typeof a === 'number' && Number.isFinite(a)) advantages = new Array<number>(n).fill(a);
    else if (Array.isArray(a) && a.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      advantages = a as number[];
      if (n > 0 && a.length !== n)
        problems.push(`"advantages" has ${a.length} values, "completionIds" has ${n} tokens`);
    } else problems.push('"advantages" must be a number or an array of numbers, one per completion token');
    let rolloutLogprobs: number[] | null = null;
    const r = obj.rolloutLogprobs;
    if (r !== undefined) {
      if (Array.isArray(r) && r.every((x) => typeof x === 'number' && Number.isFinite(x) && x <= 0)) {
        rolloutLogprobs = r as number[];
        if (n > 0 && r.length !== n)
          problems.push(`"rolloutLogprobs" has ${r.length} values, "completionIds" has ${n} tokens`);
      } else problems.push('"rolloutLogprobs" must be an array of log-probs (numbers <= 0)');
    }
    const unknown = Object.keys(obj).filter(
      (k) => !['promptIds', 'completionIds', 'advantages', 'rolloutLogprobs'].includes(k),
    );
    if (unknown.length > 0)
      problems.push(`unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')}`);
    if (problems.length > 0) errors.push(`${where}: ${problems.join('; ')}`);
    else samples.push({ promptIds, completionIds, advantages, ...(rolloutLogprobs ? { rolloutLogprobs } : {}) });
  });
  if (samples.length === 0 && errors.length === 0) errors.push(`${source}: no samples (the file is empty)`);
  return { samples, errors };
}
