// The prompt encoder's checker thread: encodes whole prompts with the model's tokenizer and says
// whether the piecewise ids were the same, so a 100 kB prompt's 130 ms encode never runs on the
// event loop that streams every response.

import { parentPort, workerData } from 'node:worker_threads';
import { TextTokenizer } from '../engine/local/tokenizer/tokenizer.js';
import type { EncodeCheck, EncodeCheckResult } from './encode-checker.js';

const port = parentPort!;
const tokenizer = await TextTokenizer.fromModelDir((workerData as { modelDir: string }).modelDir);
port.on('message', ({ id, text, ids }: EncodeCheck) => {
  let result: EncodeCheckResult;
  try {
    const whole = tokenizer.encode(text);
    result = { id, same: whole.length === ids.length && whole.every((x, i) => x === ids[i]), wholeLength: whole.length };
  } catch (e) {
    result = { id, same: false, wholeLength: -1, error: (e as Error).message };
  }
  port.postMessage(result);
});
port.postMessage('ready');
