// adviseHugePages (native/src/memory_ops.c): the learner's step buffers ask for transparent huge
// pages before their first write. Checked through /proc/self/smaps, where the kernel marks a
// mapping that took the advice with the `hg` flag, whatever the system's THP setting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { native, skipNative } from './helpers/native.js';

const MiB = 2 ** 20;

/** Sizes in bytes of this process's mappings marked `hg` (MADV_HUGEPAGE). */
function advisedMappings(): number[] {
  const sizes: number[] = [];
  let size = 0;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (header) size = Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16);
    else if (line.startsWith('VmFlags:') && line.split(/\s+/).includes('hg')) sizes.push(size);
  }
  return sizes;
}

const linux = process.platform === 'linux' ? false : 'Linux only (madvise, /proc/self/smaps)';

test('adviseHugePages marks the whole 2 MiB pages inside a buffer, and leaves its values as they were', {
  skip: skipNative || linux,
}, () => {
  const k = native();
  assert.ok(k.adviseHugePages, 'the native kernels have adviseHugePages');
  const x = new Float32Array((64 * MiB) / 4);
  for (let i = 0; i < x.length; i += 4096) x[i] = i;
  const before = advisedMappings();
  assert.equal(k.adviseHugePages(x), true);
  const after = advisedMappings();
  // The advised range: the buffer's whole 2 MiB pages, at least 62 MiB of its 64.
  const sum = (sizes: number[]) => sizes.reduce((a, b) => a + b, 0);
  const added = sum(after) - sum(before);
  assert.ok(added >= 62 * MiB && added <= 64 * MiB, `mappings marked hg grew by ${added / MiB} MiB, not 62-64`);
  for (let i = 0; i < x.length; i += 4096) assert.equal(x[i], i);
});

test('adviseHugePages declines a buffer with no whole 2 MiB page inside', { skip: skipNative || linux }, () => {
  const k = native();
  assert.equal(k.adviseHugePages!(new Float32Array(1000)), false);
  assert.equal(k.adviseHugePages!(new Float32Array((2 * MiB) / 4).subarray(1, 2)), false);
});
