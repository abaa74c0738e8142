import { isPlainObject } from '../../../common/http.js';

/** What the client of a committed stream has received, as a continuation needs it. */
export interface SentSummary {
  /** The response's `id`, `created` and `model` as the client saw them (the seam keeps them). */
  id: string | null;
  created: number | null;
  /** Answer text so far (chat `delta.content`, completions `text`). */
  text: string;
  /** Output tokens so far: `token_ids` when every content frame carried them, else one per content frame. */
  tokens: number;
  /** Output token ids, when every content frame carried them (the client asked for `return_token_ids`). */
  tokenIds: number[] | null;
  /** A frame already carried a finish_reason: the answer is complete. */
  finished: boolean;
  /** Why this output cannot be continued exactly (tool calls, reasoning, several choices), else null. */
  unresumable: string | null;
}

/**
 * What keeps the client's output so far, for a continuation: the bytes of a stream (`SentRecord`), or
 * the folded state of an assembled answer (assembled-answer.ts `AnswerFold`).
 */
export interface SentLog {
  /** Too long to keep: the request stops being migratable. */
  readonly overflow: boolean;
  /** Bytes of relayed frames held (what a long answer costs in memory beyond its text). */
  readonly retainedBytes: number;
  record(buf: Buffer): void;
  summary(): SentSummary;
}

/** A summary of nothing sent yet. */
export function emptySummary(): SentSummary {
  return { id: null, created: null, text: '', tokens: 0, tokenIds: [], finished: false, unresumable: null };
}

const SEP = Buffer.from('\n\n');
/** A stream this long is not kept for a continuation (it stops being migratable). */
export const MAX_RECORDED_BYTES = 8 * 1024 * 1024;

/**
 * The bytes of a committed stream as written to the client, kept by reference (no copy, no parse on
 * the request path) and read only when a migration needs them.
 */
export class SentRecord implements SentLog {
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** Over the limit: nothing is kept any more. */
  overflow = false;

  constructor(private readonly limit = MAX_RECORDED_BYTES) {}

  get retainedBytes(): number {
    return this.overflow ? 0 : this.bytes;
  }

  record(buf: Buffer): void {
    if (this.overflow) return;
    this.bytes += buf.length;
    if (this.bytes > this.limit) {
      this.overflow = true;
      this.chunks = [];
      return;
    }
    this.chunks.push(buf);
  }

  /** Every recorded byte, as one buffer (the frames as they were relayed). */
  bytesSoFar(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Parses what was sent (once per migration). */
  summary(): SentSummary {
    const out = emptySummary();
    const all = this.bytesSoFar();
    let start = 0;
    while (start < all.length) {
      let end = all.indexOf(SEP, start);
      if (end < 0) end = all.length;
      summarizeFrame(all.subarray(start, end).toString('utf8').trim(), out);
      start = end + 2;
    }
    return out;
  }
}

function summarizeFrame(frame: string, out: SentSummary): void {
  if (!frame.startsWith('data:')) return;
  let obj: unknown;
  try {
    obj = JSON.parse(frame.slice(5));
  } catch {
    return;
  }
  summarizeObject(obj, out);
}

/** One parsed frame's share of the summary (a frame that is not a chunk object adds nothing). */
export function summarizeObject(obj: unknown, out: SentSummary): void {
  if (!isPlainObject(obj) || !Array.isArray(obj.choices)) return;
  if (out.id === null && typeof obj.id === 'string') out.id = obj.id;
  if (out.created === null && typeof obj.created === 'number') out.created = obj.created;
  for (const c of obj.choices) {
    if (!isPlainObject(c)) continue;
    if (typeof c.index === 'number' && c.index !== 0) out.unresumable ??= 'several choices';
    if (typeof c.finish_reason === 'string') out.finished = true;
    const d = isPlainObject(c.delta) ? c.delta : null;
    if (d !== null && Array.isArray(d.tool_calls) && d.tool_calls.length > 0)
      out.unresumable ??= 'tool calls';
    if (d !== null && (typeof d.reasoning_content === 'string' || typeof d.reasoning === 'string'))
      out.unresumable ??= 'reasoning output';
    const text = d !== null ? d.content : c.text;
    const ids = c.token_ids;
    if (Array.isArray(ids) && ids.length > 0) {
      if (typeof text === 'string') out.text += text;
      if (out.tokenIds !== null) for (const id of ids) out.tokenIds.push(id as number);
      out.tokens += ids.length;
    } else if (typeof text === 'string') {
      summarizeTextOnly(text, out);
    }
  }
}

/** The text of a frame that carries no token ids (a text-only frame is read without a parse: AnswerFold). */
export function summarizeTextOnly(text: string, out: SentSummary): void {
  out.text += text;
  if (text.length === 0) return;
  // no ids: vLLM streams one frame per engine step, one token each (no speculative decoding)
  out.tokenIds = null;
  out.tokens += 1;
}
