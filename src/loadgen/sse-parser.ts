/**
 * Incremental parser for an OpenAI-style chat completion SSE stream (`data: {...}\n\n` …
 * `data: [DONE]\n\n`), written for a load generator: it works on the raw bytes, finds frame
 * boundaries with `Buffer.indexOf`, and looks only at the few fields it needs without decoding
 * ordinary chunks — a content chunk costs a couple of byte searches and no allocation. Only the
 * usage chunk and error frames (once per request) are decoded and `JSON.parse`d.
 */

export interface StreamUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const TAB = 0x09;
const COLON = 0x3a;
const QUOTE = 0x22;
const BRACE = 0x7b;

const FRAME_END_LF = Buffer.from('\n\n');
const FRAME_END_CRLF = Buffer.from('\r\n\r\n');
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');
const KEYS = [Buffer.from('"content"'), Buffer.from('"usage"'), Buffer.from('"error"')];
const CONTENT = 0;
const USAGE = 1;
const ERROR = 2;

/** Position of the first non-whitespace byte at or after `i` (or `end`). */
function skipWs(buf: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = buf[i]!;
    if (c !== SPACE && c !== TAB && c !== LF && c !== CR) return i;
    i++;
  }
  return end;
}

export class SseParser {
  /** Content chunks seen (chunks with a non-empty `delta.content`). */
  contentChunks = 0;
  /** Arrival time of the first content chunk (NaN until then). */
  firstContentMs = NaN;
  lastContentMs = NaN;
  /** `data: [DONE]` seen. */
  done = false;
  /** Message of the first `data: {"error":…}` frame, if any. */
  errorMessage: string | null = null;
  usage: StreamUsage | null = null;
  /** Frames whose payload was not understood (not JSON-looking, no data line). */
  malformedFrames = 0;

  private pending: Buffer | null = null;
  private frameEnd = FRAME_END_LF;
  private framingKnown = false;
  /**
   * Per key (content, usage, error): the next occurrence in the current buffer at or after the
   * frame being looked at (-1 = not searched yet, MAX = none left). Every key is searched for at
   * most once over each pushed buffer, however many frames it holds.
   */
  private readonly cursors = [-1, -1, -1];

  /** @param onGap called with each inter-token gap (ms) between consecutive content chunks. */
  constructor(private readonly onGap?: (gapMs: number) => void) {}

  /** Feeds the next piece of the response body, received at `nowMs`. */
  push(chunk: Buffer, nowMs: number): void {
    let buf: Buffer = chunk;
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = null;
    }
    if (!this.framingKnown) {
      // Decide LF vs CRLF framing once, from the first line ending of the stream.
      const lf = buf.indexOf(LF);
      if (lf >= 0) {
        this.framingKnown = true;
        if (lf > 0 && buf[lf - 1] === CR) this.frameEnd = FRAME_END_CRLF;
      }
    }
    const sep = this.frameEnd;
    this.cursors[0] = this.cursors[1] = this.cursors[2] = -1;
    let pos = 0;
    for (;;) {
      const end = buf.indexOf(sep, pos);
      if (end < 0) break;
      this.frame(buf, pos, end, nowMs);
      pos = end + sep.length;
    }
    // Keep the partial frame (copied, so a large chunk is not retained through a view).
    if (pos < buf.length) this.pending = Buffer.from(buf.subarray(pos));
  }

  /** Bytes of an incomplete trailing frame still buffered (non-zero at end = truncated frame). */
  get pendingBytes(): number {
    return this.pending?.length ?? 0;
  }

  private frame(buf: Buffer, start: number, end: number, nowMs: number): void {
    // A frame is one or more lines; the payload is in the `data:` line(s). Comments (`: ping`) and
    // `event:`/`id:` lines are skipped.
    let lineStart = start;
    while (lineStart < end) {
      let lineEnd = buf.indexOf(LF, lineStart);
      if (lineEnd < 0 || lineEnd > end) lineEnd = end;
      let contentEnd = lineEnd;
      if (contentEnd > lineStart && buf[contentEnd - 1] === CR) contentEnd--;
      if (
        contentEnd - lineStart >= DATA.length &&
        buf.compare(DATA, 0, DATA.length, lineStart, lineStart + DATA.length) === 0
      ) {
        let s = lineStart + DATA.length;
        if (s < contentEnd && buf[s] === SPACE) s++;
        this.payload(buf, s, contentEnd, nowMs);
      }
      lineStart = lineEnd + 1;
    }
  }

  private payload(buf: Buffer, s: number, e: number, nowMs: number): void {
    if (e - s === DONE.length && buf.compare(DONE, 0, DONE.length, s, e) === 0) {
      this.done = true;
      return;
    }
    if (buf[s] !== BRACE) {
      this.malformedFrames++;
      return;
    }
    const content = this.valueStart(buf, CONTENT, s, e);
    // A non-empty string: `"x…"`, not `""` and not `null`.
    if (content >= 0 && buf[content] === QUOTE && content + 1 < e && buf[content + 1] !== QUOTE) {
      if (this.contentChunks === 0) this.firstContentMs = nowMs;
      else this.onGap?.(nowMs - this.lastContentMs);
      this.lastContentMs = nowMs;
      this.contentChunks++;
    }
    const usage = this.valueStart(buf, USAGE, s, e);
    if (usage >= 0 && buf[usage] === BRACE) this.usage = parseUsage(decode(buf, s, e)) ?? this.usage;
    if (content < 0 && this.errorMessage === null) {
      const err = this.valueStart(buf, ERROR, s, e);
      if (err >= 0 && (buf[err] === BRACE || buf[err] === QUOTE))
        this.errorMessage = errorMessageOf(decode(buf, s, e));
    }
  }

  /**
   * First byte of the value of key `KEYS[slot]` inside [s, e), or -1. Inside JSON strings every
   * `"` is escaped, so an unescaped `"key"` followed by `:` is always a key.
   */
  private valueStart(buf: Buffer, slot: number, s: number, e: number): number {
    const key = KEYS[slot]!;
    let k = this.cursors[slot]!;
    if (k < s) k = this.cursors[slot] = next(buf, key, s);
    for (;;) {
      if (k + key.length > e) return -1;
      const c = skipWs(buf, k + key.length, e);
      if (c < e && buf[c] === COLON) return skipWs(buf, c + 1, e);
      k = this.cursors[slot] = next(buf, key, k + 1);
    }
  }
}

function next(buf: Buffer, key: Buffer, from: number): number {
  const i = buf.indexOf(key, from);
  return i < 0 ? Number.MAX_SAFE_INTEGER : i;
}

function decode(buf: Buffer, s: number, e: number): unknown {
  try {
    return JSON.parse(buf.toString('utf8', s, e)) as unknown;
  } catch {
    return undefined;
  }
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** `usage` of a chat completion (or chunk) object → token counts; null when absent. */
export function parseUsage(obj: unknown): StreamUsage | null {
  if (typeof obj !== 'object' || obj === null) return null;
  const u = (obj as { usage?: unknown }).usage;
  if (typeof u !== 'object' || u === null) return null;
  const usage = u as {
    prompt_tokens?: unknown;
    completion_tokens?: unknown;
    prompt_tokens_details?: { cached_tokens?: unknown } | null;
  };
  return {
    promptTokens: num(usage.prompt_tokens),
    completionTokens: num(usage.completion_tokens),
    cachedTokens: num(usage.prompt_tokens_details?.cached_tokens),
  };
}

/** The message of an OpenAI error body (`{"error":{"message"}}` or `{"error":"…"}`). */
export function errorMessageOf(obj: unknown): string {
  if (typeof obj === 'object' && obj !== null && 'error' in obj) {
    const e = (obj as { error: unknown }).error;
    if (typeof e === 'string') return e;
    if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string')
      return (e as { message: string }).message;
  }
  return 'error frame';
}
