import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readSafetensorsHeader, readTensorInto, writeSafetensors } from '../src/engine/local/model/safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'ocrl-st-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

test('F32 round trip is exact; BF16 rounds to nearest even within 2^-8 relative', () => {
  const a = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i) * 10 ** ((i % 7) - 3));
  const b = Float32Array.from([1, -2.5, 0, Math.PI]);
  for (const dtype of ['F32', 'BF16'] as const) {
    const path = join(dir, `rt-${dtype}.safetensors`);
    writeSafetensors(
      path,
      [
        { name: 'a', shape: [10, 100], data: a },
        { name: 'b', shape: [4], data: b },
      ],
      dtype,
    );
    const h = readSafetensorsHeader(path);
    assert.deepEqual([...h.tensors.keys()], ['a', 'b']);
    assert.deepEqual(h.tensors.get('a')!.shape, [10, 100]);
    const out = new Float32Array(1000);
    readTensorInto(path, h.tensors.get('a')!, out);
    for (let i = 0; i < a.length; i++) {
      if (dtype === 'F32') assert.equal(out[i], a[i]);
      else assert.ok(Math.abs(out[i]! - a[i]!) <= Math.abs(a[i]!) * 2 ** -8, `${out[i]} vs ${a[i]}`);
    }
  }
});

test('reads F16 tensors written by hand (normal, subnormal, negative, zero)', () => {
  const halves = [0x3c00, 0xc000, 0x0000, 0x0001, 0x7bff, 0x3555];
  const expected = [1, -2, 0, 2 ** -24, 65504, 0.333251953125];
  const header = JSON.stringify({ h: { dtype: 'F16', shape: [halves.length], data_offsets: [0, halves.length * 2] } });
  const buf = Buffer.alloc(8 + header.length + halves.length * 2);
  buf.writeBigUInt64LE(BigInt(header.length), 0);
  buf.write(header, 8);
  halves.forEach((h, i) => buf.writeUInt16LE(h, 8 + header.length + i * 2));
  const path = join(dir, 'f16.safetensors');
  writeFileSync(path, buf);
  const out = new Float32Array(halves.length);
  readTensorInto(path, readSafetensorsHeader(path).tensors.get('h')!, out);
  assert.deepEqual(
    [...out],
    expected.map((x) => Math.fround(x)),
  );
});

test('truncated and malformed files get errors naming the file and the problem', () => {
  const good = join(dir, 'good.safetensors');
  writeSafetensors(good, [{ name: 'w', shape: [64], data: new Float32Array(64) }]);
  const bytes = readFileSync(good);
  const truncated = join(dir, 'truncated.safetensors');
  writeFileSync(truncated, bytes.subarray(0, bytes.length - 10));
  assert.throws(
    () => readSafetensorsHeader(truncated),
    /truncated.safetensors: tensor "w" ends at byte .* past the end of the file/,
  );
  const garbage = join(dir, 'garbage.safetensors');
  writeFileSync(garbage, Buffer.from('this is not a safetensors file at all'));
  assert.throws(() => readSafetensorsHeader(garbage), /garbage.safetensors: header length .* does not fit/);
  const badDtype = join(dir, 'i64.safetensors');
  const header = JSON.stringify({ x: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } });
  const b = Buffer.alloc(8 + header.length + 8);
  b.writeBigUInt64LE(BigInt(header.length));
  b.write(header, 8);
  writeFileSync(badDtype, b);
  assert.throws(() => readSafetensorsHeader(badDtype), /tensor "x" has dtype "I64"; supported: F32, F16, BF16, F64/);
  assert.throws(() => readSafetensorsHeader(join(dir, 'absent.safetensors')), /absent.safetensors: cannot open/);
});
