// The tokenizer thread (tokenizer-thread.ts): encodes prompt pieces and checks whole prompts with
// the model's tokenizer, so long texts are never encoded on the event loop that streams responses.
//
// No top-level await here: close() may terminate this thread while its module is still evaluating,
// and Node 20's V8 can abort the whole process (`Check failed: (location_) != nullptr` in
// SourceTextModule::ExecuteAsyncModule, nodejs/node#53238) on that path, which only a module that
// awaits at top level takes. CI saw that abort once.

import { parentPort, workerData } from 'node:worker_threads';
import { TextTokenizer } from './tokenizer/tokenizer.js';
import type { ThreadJob, ThreadResult } from './tokenizer-thread.js';

const port = parentPort!;
const loading = TextTokenizer.fromModelDir((workerData as { modelDir: string }).modelDir);
loading.catch(() => {}); // a folder that cannot be loaded is answered to each job, not raised here

function answer(tokenizer: TextTokenizer, job: ThreadJob): { result: ThreadResult; transfer: ArrayBuffer[] } {
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

// Every job waits on the same load, so answers keep the order the jobs came in.
port.on('message', (job: ThreadJob) => {
  loading
    .then((tokenizer) => answer(tokenizer, job))
    .then(
      ({ result, transfer }) => port.postMessage(result, transfer),
      (e: Error) => port.postMessage({ id: job.id, error: e.message } satisfies ThreadResult),
    );
});
