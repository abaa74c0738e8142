import type { ByteWriter } from './byte-writer.js';
import { utf8Length } from './byte-writer.js';

/**
 * The few Python values vLLM's `sha256` block hash serialises, written byte for byte as CPython's
 * C pickler writes them with `pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)` (protocol 5 on
 * Python 3.8 and later) — vllm/utils/hashing.py `sha256`, vLLM v0.10.2 and later. Opcodes and their
 * choice follow CPython Modules/_pickle.c (`save_long`, `save_bytes`, `save_unicode`, `save_tuple`,
 * `memo_put`, `_Pickler_CommitFrame`, `_Pickler_OpcodeBoundary`) and Lib/pickletools.py:
 *
 * - `PROTO 5`, then one `FRAME` (8-byte little-endian length) around everything up to and including
 *   `STOP`; a frame whose body is under 4 bytes is written bare (FRAME_SIZE_MIN); a new frame starts
 *   before a value once the open one reached 64 KiB (FRAME_SIZE_TARGET).
 * - int 0..0xff `BININT1`, ..0xffff `BININT2`, signed 32-bit `BININT`, larger `LONG1` (little-endian
 *   two's complement, `nbits / 8 + 1` bytes); ints are not memoised.
 * - bytes: `SHORT_BINBYTES` (< 256) or `BINBYTES`; str: `SHORT_BINUNICODE` (< 256 UTF-8 bytes) or
 *   `BINUNICODE`; a tuple of 1–3 items: items then `TUPLE1/2/3`, longer: `MARK` items `TUPLE`;
 *   bytes, str and non-empty tuples are then memoised (`MEMOIZE`). `None` is `NONE`.
 *
 * Not modelled: the memo's back-references (`BINGET`), which CPython writes when the same object
 * appears twice — a block hash input holds fresh objects, except an equal LoRA name and cache salt
 * that CPython happens to intern (single characters): see test/fixtures/engines/vllm-block-hashes.
 */

const PROTO = 0x80;
const FRAME = 0x95;
const STOP = 0x2e;
const NONE = 0x4e;
const BININT = 0x4a;
const BININT1 = 0x4b;
const BININT2 = 0x4d;
const LONG1 = 0x8a;
const SHORT_BINBYTES = 0x43;
const BINBYTES = 0x42;
const SHORT_BINUNICODE = 0x8c;
const BINUNICODE = 0x58;
const MARK = 0x28;
const TUPLE = 0x74;
const TUPLE_N = [0x29, 0x85, 0x86, 0x87]; // EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3
const MEMOIZE = 0x94;
const FRAME_HEADER_SIZE = 9;
const FRAME_SIZE_MIN = 4;
const FRAME_SIZE_TARGET = 64 * 1024;

/** One pickle at a time: {@link start}, values (each preceded by {@link boundary}), {@link finish}. */
export class PickleWriter {
  private frameStart = -1;

  constructor(readonly w: ByteWriter) {}

  start(): void {
    this.w.reset();
    this.frameStart = -1;
    const at = this.w.reserve(2);
    this.w.buf[at] = PROTO;
    this.w.buf[at + 1] = 5;
  }

  /** Before each value: a full frame is closed here (the next write opens another). */
  boundary(): void {
    if (this.frameStart !== -1 && this.w.length - this.frameStart - FRAME_HEADER_SIZE >= FRAME_SIZE_TARGET)
      this.commitFrame();
  }

  finish(): Buffer {
    this.op(STOP);
    this.commitFrame();
    return this.w.view();
  }

  none(): void {
    this.op(NONE);
  }

  int(n: number): void {
    if (!Number.isSafeInteger(n)) throw new RangeError(`pickle: not an integer: ${n}`);
    if (n >= 0 && n <= 0xff) {
      const at = this.room(2);
      this.w.buf[at] = BININT1;
      this.w.buf[at + 1] = n;
    } else if (n >= 0 && n <= 0xffff) {
      const at = this.room(3);
      this.w.buf[at] = BININT2;
      this.w.buf.writeUInt16LE(n, at + 1);
    } else if (n >= -0x80000000 && n <= 0x7fffffff) {
      const at = this.room(5);
      this.w.buf[at] = BININT;
      this.w.buf.writeInt32LE(n, at + 1);
    } else this.long1(n);
  }

  bytes(b: Uint8Array): void {
    this.sized(SHORT_BINBYTES, BINBYTES, b.length);
    this.w.bytes(b);
    this.op(MEMOIZE);
  }

  str(s: string): void {
    const n = utf8Length(s);
    this.sized(SHORT_BINUNICODE, BINUNICODE, n);
    this.w.utf8(s, n);
    this.op(MEMOIZE);
  }

  /** Before the items of a tuple of `length` items. */
  tupleStart(length: number): void {
    if (length > 3) this.op(MARK);
  }

  /** After the items of a tuple of `length` items. */
  tupleEnd(length: number): void {
    if (length > 3) this.op(TUPLE);
    else this.op(TUPLE_N[length]!);
    if (length > 0) this.op(MEMOIZE);
  }

  private long1(n: number): void {
    let v = BigInt(n);
    const bytes: number[] = [];
    // nbits / 8 + 1 bytes of two's complement (CPython save_long), trimmed for negatives as it does
    const nbits = (n < 0 ? -v : v).toString(2).length;
    let count = Math.floor(nbits / 8) + 1;
    for (let i = 0; i < count; i++) {
      bytes.push(Number(v & 0xffn));
      v >>= 8n;
    }
    if (n < 0 && count > 1 && bytes[count - 1] === 0xff && (bytes[count - 2]! & 0x80) !== 0) count--;
    const at = this.room(2 + count);
    this.w.buf[at] = LONG1;
    this.w.buf[at + 1] = count;
    for (let i = 0; i < count; i++) this.w.buf[at + 2 + i] = bytes[i]!;
  }

  private sized(short: number, long: number, n: number): void {
    if (n < 256) {
      const at = this.room(2);
      this.w.buf[at] = short;
      this.w.buf[at + 1] = n;
    } else {
      const at = this.room(5);
      this.w.buf[at] = long;
      this.w.buf.writeUInt32LE(n, at + 1);
    }
  }

  private op(code: number): void {
    this.w.buf[this.room(1)] = code;
  }

  /** Reserves `n` bytes inside the open frame (opening one first). */
  private room(n: number): number {
    if (this.frameStart === -1) this.frameStart = this.w.reserve(FRAME_HEADER_SIZE);
    return this.w.reserve(n);
  }

  private commitFrame(): void {
    if (this.frameStart === -1) return;
    const { buf } = this.w;
    const bodyStart = this.frameStart + FRAME_HEADER_SIZE;
    const frameLength = this.w.length - bodyStart;
    if (frameLength >= FRAME_SIZE_MIN) {
      buf[this.frameStart] = FRAME;
      buf.writeBigUInt64LE(BigInt(frameLength), this.frameStart + 1);
    } else {
      buf.copy(buf, this.frameStart, bodyStart, this.w.length);
      this.w.length -= FRAME_HEADER_SIZE;
    }
    this.frameStart = -1;
  }
}
