/**
 * An SSE frame's bytes around one JSON string value (`data: {…"content":` + value + `},…}`), so a
 * later frame with the same bytes around a different string is read by parsing that string alone.
 * JSON is context-free: replacing one string token by another leaves the parse the same but for
 * that value. Whether the value sits where the caller thinks is for the caller to check, by parsing
 * `probe()` once (assembled-answer.ts).
 */
export class FrameTemplate {
  /** A string token to parse in place of the value: no valid frame text can contain it raw. */
  static readonly PROBE = '\u0000motor-probe';
  private static readonly PROBE_JSON = JSON.stringify(FrameTemplate.PROBE);

  /**
   * The same bytes as 32-bit little-endian words, compared four bytes at a time; made by the first
   * `textAt` (most templates are candidates that never read a frame: issue 19, ~3 per answer).
   */
  private prefixWords: Uint32Array | null = null;
  private suffixWords: Uint32Array | null = null;

  /** `prefix`, `suffix`: views of the frame it was learnt from (a template lives as long as its answer's frames). */
  private constructor(
    private readonly prefix: Buffer,
    private readonly suffix: Buffer,
  ) {}

  /**
   * The template around the string value that follows the last `key` in `frame` (`key` is the
   * quoted key and its colon, e.g. `"content":`); null when none follows it directly.
   */
  static around(frame: Buffer, key: Buffer): FrameTemplate | null {
    const at = frame.lastIndexOf(key);
    if (at < 0) return null;
    const open = at + key.length;
    if (frame[open] !== 0x22) return null;
    const close = closingQuote(frame, open + 1);
    // (a suffix ending in a newline would put a separator inside the next frame's match)
    if (close < 0 || frame[frame.length - 1] === 0x0a) return null;
    return new FrameTemplate(frame.subarray(0, open), frame.subarray(close + 1));
  }

  /** Whether `other` has the same bytes around its value. */
  sameAs(other: FrameTemplate): boolean {
    return this.prefix.equals(other.prefix) && this.suffix.equals(other.suffix);
  }

  /** The frame's JSON payload with the probe in place of the value (its first 6 bytes: `data: `). */
  probe(): string {
    return this.prefix.toString('utf8', 6) + FrameTemplate.PROBE_JSON + this.suffix.toString('utf8');
  }

  /** After a match: where the next frame starts (past the separator, or the buffer's end). */
  next = 0;

  /**
   * When the frame starting at `from` (up to the next `\n\n` or the end of `buf`) is this template
   * around one JSON string: that string, and `next` is set. Else null (the caller parses the frame
   * whole). One pass over the frame's bytes in JS: no native call but the text's decode.
   */
  textAt(buf: Buffer, from: number): string | null {
    const { prefix, suffix } = this;
    const n = buf.length;
    const plen = prefix.length;
    if (from + plen + 2 + suffix.length > n) return null;
    if (!sameBytes(buf, from, prefix, (this.prefixWords ??= wordsOf(prefix)))) return null;
    const open = from + plen;
    if (buf[open] !== 0x22) return null;
    let escaped = false;
    let close = open + 1;
    for (; close < n; close++) {
      const c = buf[close]!;
      if (c === 0x22) break;
      if (c < 0x20) return null; // not valid JSON (and a raw newline could hide a separator)
      if (c === 0x5c) {
        escaped = true;
        close++;
      }
    }
    const at = close + 1;
    const end = at + suffix.length;
    if (end > n) return null;
    if (!sameBytes(buf, at, suffix, (this.suffixWords ??= wordsOf(suffix)))) return null;
    if (end === n) this.next = n;
    else if (buf[end] === 0x0a && buf[end + 1] === 0x0a) this.next = end + 2;
    else return null;
    if (!escaped) return buf.toString('utf8', open + 1, close);
    try {
      return JSON.parse(buf.toString('utf8', open, close + 1)) as string;
    } catch {
      return null; // an invalid escape: the whole frame does not parse either
    }
  }
}

function wordsOf(bytes: Buffer): Uint32Array {
  const words = new Uint32Array(bytes.length >>> 2);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let k = 0; k < words.length; k++) words[k] = view.getUint32(k * 4, true);
  return words;
}

/** Whether `buf` holds `bytes` at `at` (in bounds: the caller checked). */
function sameBytes(buf: Buffer, at: number, bytes: Buffer, words: Uint32Array): boolean {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  for (let k = 0; k < words.length; k++) if (view.getUint32(at + k * 4, true) !== words[k]) return false;
  for (let k = words.length * 4; k < bytes.length; k++) if (buf[at + k] !== bytes[k]) return false;
  return true;
}

/** Index of the quote ending the JSON string whose text starts at `from`, else -1. */
function closingQuote(buf: Buffer, from: number): number {
  let q = buf.indexOf(0x22, from);
  while (q >= 0) {
    let backslashes = 0;
    while (q - 1 - backslashes >= from && buf[q - 1 - backslashes] === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return q;
    q = buf.indexOf(0x22, q + 1);
  }
  return -1;
}
