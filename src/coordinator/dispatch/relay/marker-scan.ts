/**
 * "Does this buffer contain any of these byte strings, and where?" in one pass over the bytes,
 * instead of one `Buffer.includes` per marker (issue 19: the relay checked each SSE chunk for up to
 * seven markers, seven native calls over the same few hundred bytes). Every marker holds an anchor
 * byte — its first `"` or `[` — and only at those bytes are markers compared, so a chunk costs one JS
 * loop over its bytes plus a few comparisons per quote. Whether one is found is exactly
 * `markers.some((m) => buf.includes(m))`, and where is defined by `indexOf` too (marker-scan.test.ts
 * checks both on generated input).
 */

interface Anchored {
  readonly bytes: Buffer;
  /** Index of the anchor byte in `bytes`. */
  readonly at: number;
  readonly anchor: number;
  /** The bytes just before and after the anchor (-1: none), checked first. */
  readonly before: number;
  readonly after: number;
}

const QUOTE = 0x22;
const BRACKET = 0x5b;

export class MarkerScan {
  private readonly quoted: Anchored[] = [];
  private readonly bracketed: Anchored[] = [];

  constructor(markers: readonly Buffer[]) {
    for (const bytes of markers) {
      const q = bytes.indexOf(QUOTE);
      const b = bytes.indexOf(BRACKET);
      const at = q < 0 ? b : b < 0 ? q : Math.min(q, b);
      if (at < 0)
        throw new Error(`marker ${JSON.stringify(bytes.toString())} has no '"' or '[' to anchor on`);
      const m: Anchored = {
        bytes,
        at,
        anchor: bytes[at]!,
        before: at > 0 ? bytes[at - 1]! : -1,
        after: at + 1 < bytes.length ? bytes[at + 1]! : -1,
      };
      (m.anchor === QUOTE ? this.quoted : this.bracketed).push(m);
    }
  }

  /**
   * Where the first marker occurrence starting at or after `from` has its anchor byte, else -1 (none
   * in `buf`): the least `buf.indexOf(m, from) + (m's anchor index)` over the markers found. The scan
   * stops there: a caller scanning on from past that occurrence scans each byte once.
   */
  anchorIn(buf: Buffer, from = 0): number {
    const n = buf.length;
    const quoted = this.quoted;
    const bracketed = this.bracketed;
    for (let i = from; i < n; i++) {
      const c = buf[i];
      if (c === QUOTE) {
        for (let k = 0; k < quoted.length; k++) if (matchesAt(buf, from, i, quoted[k]!)) return i;
      } else if (c === BRACKET) {
        for (let k = 0; k < bracketed.length; k++) if (matchesAt(buf, from, i, bracketed[k]!)) return i;
      }
    }
    return -1;
  }
}

/** Whether marker `m` occurs in `buf` at or after `from` with its anchor byte at `i`. */
function matchesAt(buf: Buffer, from: number, i: number, m: Anchored): boolean {
  if ((m.after >= 0 && buf[i + 1] !== m.after) || (m.before >= 0 && buf[i - 1] !== m.before)) return false;
  const start = i - m.at;
  const bytes = m.bytes;
  const len = bytes.length;
  if (start < from || start + len > buf.length) return false;
  for (let j = 0; j < len; j++) if (buf[start + j] !== bytes[j]) return false;
  return true;
}
