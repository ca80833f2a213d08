// Reads the JSON files of a Hugging Face model folder with errors that name the file and the problem.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Parses `dir/name` as a JSON object, e.g. readModelJson(dir, 'tokenizer.json'). */
export async function readModelJson(dir: string, name: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(join(dir, name), 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`${name} not found in ${dir}`);
    throw new Error(`${name} in ${dir} cannot be read: ${errorMessage(error)}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${name} in ${dir} is not valid JSON: ${errorMessage(error)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${name} in ${dir} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
