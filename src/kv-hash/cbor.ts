import type { ByteWriter } from './byte-writer.js';
import { utf8Length } from './byte-writer.js';

/**
 * The few CBOR items vLLM's `sha256_cbor` block hash serialises, written as the Python `cbor2`
 * library's `dumps(obj, canonical=True)` writes them (vllm/utils/hashing.py `sha256_cbor`, vLLM
 * v0.10.2 and later): `None` → simple value 22 (0xf6); an `int` ≥ 0 → major type 0 in its shortest
 * form (RFC 8949 §4.2.1 "preferred serialization", which cbor2 always uses for integers); `bytes` →
 * major type 2; `str` → major type 3 (UTF-8); a tuple → major type 4, definite length. Canonical mode
 * changes only map-key order and float width, neither of which appears in a block hash input.
 */

const NULL = 0xf6;

/** Head of a data item: major type and argument, shortest form (RFC 8949 §3). */
export function writeHead(w: ByteWriter, major: number, value: number): void {
  const mt = major << 5;
  if (value < 24) w.byte(mt | value);
  else if (value <= 0xff) {
    const at = w.reserve(2);
    w.buf[at] = mt | 24;
    w.buf[at + 1] = value;
  } else if (value <= 0xffff) {
    const at = w.reserve(3);
    w.buf[at] = mt | 25;
    w.buf.writeUInt16BE(value, at + 1);
  } else if (value <= 0xffffffff) {
    const at = w.reserve(5);
    w.buf[at] = mt | 26;
    w.buf.writeUInt32BE(value, at + 1);
  } else {
    const at = w.reserve(9);
    w.buf[at] = mt | 27;
    w.buf.writeBigUInt64BE(BigInt(value), at + 1);
  }
}

export function cborUint(w: ByteWriter, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`cbor: not a non-negative integer: ${n}`);
  writeHead(w, 0, n);
}

export function cborBytes(w: ByteWriter, b: Uint8Array): void {
  writeHead(w, 2, b.length);
  w.bytes(b);
}

export function cborText(w: ByteWriter, s: string): void {
  const n = utf8Length(s);
  writeHead(w, 3, n);
  w.utf8(s, n);
}

export function cborArrayHead(w: ByteWriter, length: number): void {
  writeHead(w, 4, length);
}

export function cborNull(w: ByteWriter): void {
  w.byte(NULL);
}
