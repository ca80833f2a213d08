// The tokenizer thread (tokenizer-thread.ts): encodes prompt pieces and checks whole prompts with
// the model's tokenizer, so long texts are never encoded on the event loop that streams responses.

import { parentPort, workerData } from 'node:worker_threads';
import { TextTokenizer } from './tokenizer/tokenizer.js';
import type { ThreadJob, ThreadResult } from './tokenizer-thread.js';

const port = parentPort!;
const tokenizer = await TextTokenizer.fromModelDir((workerData as { modelDir: string }).modelDir);

function answer(job: ThreadJob): { result: ThreadResult; transfer: ArrayBuffer[] } {
  if (job.type === 'check') {
    const whole = tokenizer.encode(job.text);
    const same = whole.length === job.ids.length && whole.every((x, i) => x === job.ids[i]);
    return { result: { id: job.id, same, wholeLength: whole.length }, transfer: [] };
  }
  // Counted first, without BPE: a prompt that cannot fit is refused at the cost of a regex pass.
  let atLeast = 0;
  for (const piece of job.pieces) {
    atLeast += tokenizer.minTokens(piece, job.limit - atLeast);
    if (atLeast >= job.limit) return { result: { id: job.id, atLeast }, transfer: [] };
  }
  const texts = job.whole === undefined ? job.pieces : [job.whole];
  const ids = texts.map((p) => Int32Array.from(tokenizer.encode(p)));
  return { result: { id: job.id, ids }, transfer: ids.map((a) => a.buffer as ArrayBuffer) };
}

port.on('message', (job: ThreadJob) => {
  try {
    const { result, transfer } = answer(job);
    port.postMessage(result, transfer);
  } catch (e) {
    port.postMessage({ id: job.id, error: (e as Error).message } satisfies ThreadResult);
  }
});
