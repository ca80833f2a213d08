// The native kernels for tests that compare them with the portable ones. A missing addon fails
// the test with build instructions (CI always builds it), unless OPENCLAW_RL_KERNELS=portable.

import type { Kernels } from '../../src/engine/local/kernels/kernels.js';
import { loadNativeKernels } from '../../src/engine/local/kernels/native.js';

const portableOnly = process.env.OPENCLAW_RL_KERNELS === 'portable';
export const skipNative = portableOnly ? 'OPENCLAW_RL_KERNELS=portable: native kernels not tested' : false;

let nativeLoad: { kernels?: Kernels; error?: Error } | undefined;

/** The native kernels; throws (failing the test) with build instructions when the addon is missing. */
export function native(): Kernels {
  if (!nativeLoad) {
    try {
      nativeLoad = { kernels: loadNativeKernels() };
    } catch (err) {
      nativeLoad = { error: err as Error };
    }
  }
  if (nativeLoad.kernels) return nativeLoad.kernels;
  throw new Error(
    `${nativeLoad.error?.message}\nBuild it with \`node scripts/build-native.mjs\`, or run with ` +
      `OPENCLAW_RL_KERNELS=portable to test only the portable kernels.`,
  );
}
