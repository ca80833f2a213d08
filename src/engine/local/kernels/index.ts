// Chooses the kernels for this thread: the native addon when it loads, otherwise the portable
// TypeScript kernels with a one-line notice. OPENCLAW_RL_KERNELS overrides the choice:
// `portable` forces the TypeScript kernels (tests, benchmarks), `native` makes a missing
// addon an error instead of a fallback.
import { loadNativeKernels } from './native.js';
import { portableKernels } from './portable.js';
import type { Kernels } from './kernels.js';

export type { Kernels } from './kernels.js';

// Set in process.env once the fallback notice is printed. Worker threads get a copy of their
// parent's environment when they are created, so calling loadKernels() on the main thread
// before starting workers makes the notice appear once per process rather than per worker.
const NOTICE_SHOWN = 'OPENCLAW_RL_KERNELS_NOTICE_SHOWN';

// Module state is per thread: every worker loads its own copy of this module.
let chosen: Kernels | undefined;

/** The kernels for this thread, chosen on the first call and cached after that. */
export function loadKernels(): Kernels {
  chosen ??= chooseKernels(process.env.OPENCLAW_RL_KERNELS ?? '');
  return chosen;
}

function chooseKernels(setting: string): Kernels {
  switch (setting) {
    case 'portable':
      return portableKernels;
    case 'native':
      return loadNativeKernels();
    case '':
      try {
        return loadNativeKernels();
      } catch (err) {
        noticeFallback((err as Error).message);
        return portableKernels;
      }
    default:
      throw new Error(
        `OPENCLAW_RL_KERNELS=${setting} is not supported: use "native", "portable", or leave it unset ` +
          `(native, falling back to portable)`,
      );
  }
}

function noticeFallback(reason: string): void {
  if (process.env[NOTICE_SHOWN]) return;
  process.env[NOTICE_SHOWN] = '1';
  process.stderr.write(`openclaw-rl: using the portable TypeScript kernels (much slower); ${reason}\n`);
}
