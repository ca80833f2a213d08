// The safetensors format: 8-byte little-endian header length, a JSON header mapping tensor names
// to {dtype, shape, data_offsets} (offsets relative to the end of the header), then raw bytes.
// We read F32, F16, BF16 and F64 into float32 and write F32 or BF16, always atomically.

import { closeSync, fsyncSync, openSync, readSync, renameSync, statSync, writeSync } from 'node:fs';
import { openPrivateFile } from '../../../private-files.js';

export type StoredDtype = 'F32' | 'F16' | 'BF16' | 'F64';

export interface TensorEntry {
  name: string;
  dtype: StoredDtype;
  shape: number[];
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  path: string;
  tensors: Map<string, TensorEntry>;
  metadata: Record<string, string>;
}

const BYTES: Record<StoredDtype, number> = { F32: 4, F16: 2, BF16: 2, F64: 8 };
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export class SafetensorsError extends Error {
  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.name = 'SafetensorsError';
  }
}

export function readSafetensorsHeader(path: string): SafetensorsHeader {
  const fail = (m: string): never => {
    throw new SafetensorsError(path, m);
  };
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    return fail(`cannot open: ${(e as Error).message}`);
  }
  try {
    const fileSize = statSync(path).size;
    if (fileSize < 8) fail(`file is ${fileSize} bytes, too short to be safetensors`);
    const lenBuf = Buffer.alloc(8);
    readSync(fd, lenBuf, 0, 8, 0);
    const headerLen = Number(lenBuf.readBigUInt64LE(0));
    if (headerLen > MAX_HEADER_BYTES || 8 + headerLen > fileSize)
      fail(`header length ${headerLen} does not fit a ${fileSize}-byte file (not a safetensors file?)`);
    const headerBuf = Buffer.alloc(headerLen);
    readSync(fd, headerBuf, 0, headerLen, 8);
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(headerBuf.toString('utf8')) as Record<string, unknown>;
    } catch (e) {
      return fail(`header is not valid JSON: ${(e as Error).message}`);
    }
    const dataStart = 8 + headerLen;
    const tensors = new Map<string, TensorEntry>();
    let metadata: Record<string, string> = {};
    for (const [name, raw] of Object.entries(header)) {
      if (name === '__metadata__') {
        metadata = (raw ?? {}) as Record<string, string>;
        continue;
      }
      const t = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const dtype = t.dtype as StoredDtype;
      if (!(dtype in BYTES))
        fail(`tensor "${name}" has dtype ${JSON.stringify(t.dtype)}; supported: F32, F16, BF16, F64`);
      const shape = t.shape;
      if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0))
        fail(`tensor "${name}" has an invalid shape ${JSON.stringify(shape)}`);
      const offs = t.data_offsets;
      if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isInteger(o) && o >= 0))
        fail(`tensor "${name}" has invalid data_offsets`);
      const [b, e] = offs as [number, number];
      const count = (shape as number[]).reduce((a, d) => a * d, 1);
      if (e - b !== count * BYTES[dtype])
        fail(
          `tensor "${name}": data_offsets span ${e - b} bytes but shape ${JSON.stringify(shape)} of ${dtype} needs ${count * BYTES[dtype]}`,
        );
      if (dataStart + e > fileSize)
        fail(
          `tensor "${name}" ends at byte ${dataStart + e}, past the end of the file (${fileSize} bytes): truncated download?`,
        );
      tensors.set(name, { name, dtype, shape: shape as number[], begin: dataStart + b, end: dataStart + e });
    }
    return { path, tensors, metadata };
  } finally {
    closeSync(fd);
  }
}

/** Reads one tensor's data into `out` (float32), converting from its stored dtype. */
export function readTensorInto(path: string, entry: TensorEntry, out: Float32Array): void {
  const count = (entry.end - entry.begin) / BYTES[entry.dtype];
  if (out.length !== count)
    throw new SafetensorsError(
      path,
      `tensor "${entry.name}": destination holds ${out.length} values, tensor has ${count}`,
    );
  const fd = openSync(path, 'r');
  try {
    if (entry.dtype === 'F32') {
      readFully(fd, new Uint8Array(out.buffer, out.byteOffset, out.byteLength), entry.begin, path);
      return;
    }
    const CHUNK = 1 << 20; // values per read, bounded scratch
    if (entry.dtype === 'F64') {
      const raw = new Float64Array(Math.min(count, CHUNK));
      for (let done = 0; done < count; done += raw.length) {
        const n = Math.min(raw.length, count - done);
        readFully(fd, new Uint8Array(raw.buffer, 0, n * 8), entry.begin + done * 8, path);
        for (let i = 0; i < n; i++) out[done + i] = raw[i]!;
      }
      return;
    }
    const raw = new Uint16Array(Math.min(count, CHUNK));
    const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
    for (let done = 0; done < count; done += raw.length) {
      const n = Math.min(raw.length, count - done);
      readFully(fd, new Uint8Array(raw.buffer, 0, n * 2), entry.begin + done * 2, path);
      if (entry.dtype === 'BF16') for (let i = 0; i < n; i++) bits[done + i] = raw[i]! << 16;
      else for (let i = 0; i < n; i++) out[done + i] = halfToFloat(raw[i]!);
    }
  } finally {
    closeSync(fd);
  }
}

function readFully(fd: number, dst: Uint8Array, position: number, path: string): void {
  let got = 0;
  while (got < dst.length) {
    const n = readSync(fd, dst, got, Math.min(dst.length - got, 1 << 30), position + got);
    if (n === 0) throw new SafetensorsError(path, `unexpected end of file at byte ${position + got}`);
    got += n;
  }
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

export interface TensorToWrite {
  name: string;
  shape: number[];
  data: Float32Array;
}

/**
 * Writes tensors as one safetensors file, F32 or BF16 (round to nearest even). The file appears
 * under its final name only when complete (temp file + fsync + rename).
 */
export function writeSafetensors(
  path: string,
  tensors: TensorToWrite[],
  dtype: 'F32' | 'BF16' = 'F32',
  metadata: Record<string, string> = { format: 'pt' },
): void {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    const count = t.shape.reduce((a, d) => a * d, 1);
    if (count !== t.data.length)
      throw new Error(
        `writeSafetensors: tensor "${t.name}" has ${t.data.length} values but shape ${JSON.stringify(t.shape)}`,
      );
    const bytes = count * BYTES[dtype];
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // keep the data 8-byte aligned
  const headerBytes = Buffer.from(json, 'utf8');
  const tmp = `${path}.tmp-${process.pid}`;
  // Weights may be trained on conversations: private like the store.
  const fd = openPrivateFile(tmp, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(headerBytes.length));
    writeSync(fd, len);
    writeSync(fd, headerBytes);
    for (const t of tensors) {
      if (dtype === 'F32') writeAll(fd, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      else writeAll(fd, toBf16Bytes(t.data));
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, Math.min(bytes.length - done, 1 << 30));
}

function toBf16Bytes(data: Float32Array): Uint8Array {
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const b = bits[i]!;
    out[i] = (b + 0x7fff + ((b >> 16) & 1)) >>> 16;
  }
  return new Uint8Array(out.buffer);
}
