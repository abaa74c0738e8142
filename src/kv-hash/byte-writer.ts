/**
 * A growable byte buffer that is reset and reused between encodings, so encoding a block allocates
 * nothing once it has grown to the largest block seen.
 */
export class ByteWriter {
  buf: Buffer;
  length = 0;

  constructor(initialBytes = 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  reset(): void {
    this.length = 0;
  }

  /** Makes room for `n` more bytes; returns the offset to write them at. */
  reserve(n: number): number {
    const at = this.length;
    if (at + n > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, at + n));
      this.buf.copy(grown, 0, 0, at);
      this.buf = grown;
    }
    this.length = at + n;
    return at;
  }

  byte(b: number): void {
    this.buf[this.reserve(1)] = b;
  }

  bytes(src: Uint8Array): void {
    this.buf.set(src, this.reserve(src.length));
  }

  /** `s` as UTF-8 (the caller wrote its length first: {@link utf8Length}). */
  utf8(s: string, byteLength: number): void {
    this.buf.write(s, this.reserve(byteLength), byteLength, 'utf8');
  }

  /** The encoded bytes (a view: valid until the next reset). */
  view(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

export const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');
