import { isPlainObject } from '../../../common/http.js';
import {
  clientForbiddenMarks,
  mayCarryClientForbiddenFields,
  stripClientForbiddenFields,
} from '../../../engine-adapters/index.js';
import { MarkerScan } from './marker-scan.js';
import { isRecomputed, RECOMPUTED_MARK } from '../migration/recompute.js';

export interface ResponseRewrite {
  /** Cached prompt tokens reported by the prefill leg, merged into `usage.prompt_tokens_details`. */
  cachedTokens: number | null;
  /** Remove `token_ids` / `prompt_token_ids` (the client did not ask for them). */
  stripTokenIds: boolean;
  /**
   * P/D: shown the decode's own usage before the prefill's cached tokens replace its count (the
   * KV-load watch reads it here, where the frame is parsed anyway).
   */
  onDecodeUsage?: ((usage: Record<string, unknown>) => void) | null;
}

/**
 * Rewrites one response object (a non-stream body or one SSE chunk) in place: drops what a client
 * may not see (`stripClientForbiddenFields`, shared with the engine proxy) and merges the prefill
 * leg's cached-token count into the usage. Returns whether anything changed.
 */
export function rewriteResponseObject(obj: Record<string, unknown>, rw: ResponseRewrite): boolean {
  let changed = stripClientForbiddenFields(obj, 'coordinator', rw.stripTokenIds);
  if (rw.cachedTokens !== null && isPlainObject(obj.usage)) {
    const usage = obj.usage;
    rw.onDecodeUsage?.(usage);
    const details = isPlainObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
    usage.prompt_tokens_details = { ...details, cached_tokens: rw.cachedTokens };
    changed = true;
  }
  return changed;
}

const SEP = Buffer.from('\n\n');
const DONE = Buffer.from('data: [DONE]');
const DONE_FRAME = Buffer.from('data: [DONE]\n\n');
const ERROR_PREFIX = Buffer.from('data: {"error"');
const MARK_USAGE = Buffer.from('"usage":{');

/** Whether a response body (or chunk) holds anything `rewriteResponseObject` would change. */
export function needsRewrite(buf: Buffer, rw: ResponseRewrite): boolean {
  return (
    mayCarryClientForbiddenFields(buf, 'coordinator', rw.stripTokenIds) ||
    (rw.cachedTokens !== null && buf.includes(MARK_USAGE))
  );
}

/**
 * What `SseRelay` looks for in a chunk — its own markers and `needsRewrite`'s — as one scan for each
 * of the four rewrite configurations (looked up per chunk: the prefill's cached tokens may arrive
 * while the decode leg streams, prefill-result.ts).
 */
const RELAY_SCANS: readonly MarkerScan[] = [0, 1, 2, 3].map((key) => {
  const stripTokenIds = (key & 1) !== 0;
  const marks = [DONE, ERROR_PREFIX, RECOMPUTED_MARK, ...clientForbiddenMarks('coordinator', stripTokenIds)];
  if ((key & 2) !== 0) marks.push(MARK_USAGE);
  // push() finds a marked frame from where the marker is: no marker may hold a separator's or a
  // blank line's byte
  if (marks.some((m) => m.includes(10) || m.includes(13))) throw new Error('an SSE marker holds a newline');
  return new MarkerScan(marks);
});
const relayScanFor = (rw: ResponseRewrite): MarkerScan =>
  RELAY_SCANS[(rw.stripTokenIds ? 1 : 0) | (rw.cachedTokens !== null ? 2 : 0)]!;

const TRAILING_NULL_KV = Buffer.from(',"kv_transfer_params":null}');
const CLOSE_BRACE = Buffer.from('}');

/**
 * vLLM ends every non-stream body with `,"kv_transfer_params":null}`. Those bytes just before the
 * final `}` are a member of the outermost object, so cutting them is exactly what
 * `rewriteResponseObject` would do to that key — without a parse and re-serialisation.
 * Returns null when the body does not end that way.
 */
export function withoutTrailingNullKv(buf: Buffer): Buffer | null {
  let end = buf.length;
  while (
    end > 0 &&
    (buf[end - 1] === 0x20 || buf[end - 1] === 0x0a || buf[end - 1] === 0x0d || buf[end - 1] === 0x09)
  )
    end--;
  const start = end - TRAILING_NULL_KV.length;
  if (start < 0 || buf.compare(TRAILING_NULL_KV, 0, TRAILING_NULL_KV.length, start, end) !== 0) return null;
  return Buffer.concat([buf.subarray(0, start), CLOSE_BRACE]);
}

/** Whether `buf` ends with `tail` (compared in JS: a native call costs more for a few bytes). */
function endsWith(buf: Buffer, tail: Buffer): boolean {
  const at = buf.length - tail.length;
  if (at < 0) return false;
  for (let k = tail.length - 1; k >= 0; k--) if (buf[at + k] !== tail[k]) return false;
  return true;
}

/**
 * Passes an upstream SSE byte stream through with minimal re-parsing. A chunk made of whole frames
 * that carries none of the markers below is forwarded as the same Buffer (no copy, no JSON parse);
 * only frames that need a rewrite (usage to merge, internal keys, unrequested token ids) are parsed.
 * The upstream `data: [DONE]` is swallowed: the relay's owner writes the one terminator itself.
 */
export class SseRelay {
  /** The upstream sent `data: [DONE]`. */
  sawDone = false;
  /** Message of an upstream `data: {"error":…}` frame (the frame itself is forwarded). */
  upstreamError: string | null = null;
  /**
   * The upstream ended the answer with `stop_reason: "recomputed"` (recompute.ts). That frame is
   * dropped: it may repeat the last token, and the answer is not finished.
   */
  recomputed = false;
  private carry: Buffer | null = null;

  constructor(private readonly rw: ResponseRewrite) {}

  /**
   * Bytes to forward for this upstream chunk (null: nothing yet). Each byte is scanned for markers
   * once: a chunk holding a whole answer (an engine or sim that is ahead of the network) ends with
   * `[DONE]`, so that case is told from the chunk's end before any scan (scanning the chunk first,
   * then the frames before `[DONE]`, cost two more passes over every byte, issue 19); and a chunk
   * that needs work goes frame by frame knowing where the scan found a marker, scanning on past a
   * marked frame only (a rescan of each frame was a second pass over a P/D answer, whose usage frame
   * takes the prefill's cached tokens).
   */
  push(chunk: Buffer): Buffer | null {
    const data = this.carry === null ? chunk : Buffer.concat([this.carry, chunk]);
    const n = data.length;
    // (a chunk of whole frames, the usual case, needs no search for its last separator)
    const lastSep = n >= 2 && data[n - 1] === 10 && data[n - 2] === 10 ? n - 2 : data.lastIndexOf(SEP);
    if (lastSep < 0) {
      this.carry = data;
      return null;
    }
    const whole = lastSep + 2;
    this.carry = whole < n ? data.subarray(whole) : null;
    const frames = whole === n ? data : data.subarray(0, whole);
    const scan = relayScanFor(this.rw);
    let mark: number;
    if (endsWith(frames, DONE_FRAME)) {
      // The usual last chunk: plain frames then `data: [DONE]`, checked as one buffer.
      const b = whole - DONE_FRAME.length;
      // (a blank line before [DONE] takes the frame-by-frame path, which drops it)
      const clean =
        b === 0 || (b >= 3 && frames[b - 1] === 10 && frames[b - 2] === 10 && frames[b - 3] !== 10);
      if (clean) {
        // (a mark in the frames before [DONE] is at the same place in `frames`)
        mark = b === 0 ? -1 : scan.anchorIn(frames.subarray(0, b));
        if (mark < 0) {
          this.sawDone = true;
          return b === 0 ? null : frames.subarray(0, b);
        }
      } else mark = scan.anchorIn(frames);
    } else {
      mark = scan.anchorIn(frames);
      if (mark < 0) return frames;
    }
    const out: Buffer[] = [];
    let start = 0;
    while (start < whole) {
      // -1: the last separator overlapped the previous one ("\n\n\n"); the rest is blank.
      let end = frames.indexOf(SEP, start);
      if (end < 0) end = whole;
      const frame = frames.subarray(start, end);
      start = end + 2;
      // No marker spans a separator (none holds a newline): the frame holds one iff the first one
      // found since the last marked frame lies before its end.
      const marked = mark >= 0 && mark < end;
      if (marked) mark = scan.anchorIn(frames, start);
      const rewritten = this.frame(frame, marked);
      if (rewritten !== null) out.push(rewritten, SEP);
    }
    return out.length === 0 ? null : Buffer.concat(out);
  }

  /** Leftover bytes of an incomplete frame at end of stream (a truncated upstream). */
  get pendingBytes(): number {
    return this.carry?.length ?? 0;
  }

  /**
   * One frame without its separator → bytes to forward, or null to drop it. `marked`: it holds a
   * marker (`[DONE]` is one), so it may need a look.
   */
  private frame(raw: Buffer, marked: boolean): Buffer | null {
    // Extra blank lines between frames (an engine writing "\n\n\n") are not part of the frame.
    let blank = 0;
    while (blank < raw.length && (raw[blank] === 10 || raw[blank] === 13)) blank++;
    const frame = blank === 0 ? raw : raw.subarray(blank);
    if (frame.length === 0) return null;
    if (!marked) return frame;
    if (
      frame.equals(DONE) ||
      (frame.subarray(0, DONE.length).equals(DONE) && frame.subarray(DONE.length).toString().trim() === '')
    ) {
      this.sawDone = true;
      return null;
    }
    const text = frame.toString('utf8');
    if (!text.startsWith('data:')) return frame;
    const json = text.slice(5).trim();
    let obj: unknown;
    try {
      obj = JSON.parse(json);
    } catch {
      return frame;
    }
    if (!isPlainObject(obj)) return frame;
    if ('error' in obj) {
      const e = obj.error;
      this.upstreamError =
        isPlainObject(e) && typeof e.message === 'string'
          ? e.message
          : typeof e === 'string'
            ? e
            : JSON.stringify(e);
      return frame;
    }
    if (isRecomputed(obj)) {
      this.recomputed = true;
      return null;
    }
    return rewriteResponseObject(obj, this.rw) ? Buffer.from(`data: ${JSON.stringify(obj)}`) : frame;
  }
}

export const SSE_DONE_FRAME = 'data: [DONE]\n\n';

export function sseErrorFrame(message: string, type: string, code: string | number | null): string {
  return `data: ${JSON.stringify({ error: { message, type, param: null, code } })}\n\n`;
}
