import { isPlainObject } from '../../../common/http.js';
import type { SentSummary } from './sent-so-far.js';

const SEP = Buffer.from('\n\n');

/**
 * Joins a continuation leg's stream to the answer the client already has: frames keep the first
 * response's `id` and `created`; the role is not sent twice (a frame left empty is dropped); the
 * usage describes the whole answer (prompt = the original prompt, completion = every token the
 * client received); a stop string begun before the seam and finished after it ends the answer
 * there (finish "stop"). Continuation legs only: every frame is parsed.
 */
export class StreamSeam {
  /** The sent text's tail a stop string may start in (longest stop − 1 characters). */
  private tail: string;
  /** New text seen so far while a seam-spanning stop is still possible. */
  private fresh = '';
  private readonly maxStop: number;
  /** A stop string spanned the seam: the answer is over; later frames are dropped. */
  ended = false;
  /** Set by the first frame that carries output (for the failure-to-next-token time). */
  onFirstOutput: (() => void) | null = null;

  constructor(
    private readonly sent: SentSummary,
    private readonly stops: readonly string[],
  ) {
    this.maxStop = stops.reduce((m, s) => Math.max(m, s.length), 0);
    this.tail = this.maxStop > 1 ? sent.text.slice(-(this.maxStop - 1)) : '';
  }

  /** Relay output of the continuation leg → bytes for the client (null: nothing). */
  rewrite(buf: Buffer): Buffer | null {
    if (this.ended) return null;
    const out: string[] = [];
    let start = 0;
    while (start < buf.length) {
      let end = buf.indexOf(SEP, start);
      if (end < 0) end = buf.length;
      const frame = buf.subarray(start, end).toString('utf8');
      start = end + 2;
      const rewritten = this.frame(frame);
      if (rewritten !== null) out.push(rewritten, '\n\n');
      if (this.ended) break;
    }
    return out.length === 0 ? null : Buffer.from(out.join(''));
  }

  private frame(frame: string): string | null {
    const t = frame.trim();
    if (t.length === 0) return null;
    if (!t.startsWith('data:')) return frame;
    let obj: unknown;
    try {
      obj = JSON.parse(t.slice(5));
    } catch {
      return frame;
    }
    if (!isPlainObject(obj) || !Array.isArray(obj.choices)) return frame; // error frames pass unchanged
    if (this.sent.id !== null) obj.id = this.sent.id;
    if (this.sent.created !== null) obj.created = this.sent.created;
    const kept: unknown[] = [];
    for (const c of obj.choices) if (!isPlainObject(c) || this.choice(c)) kept.push(c);
    if (isPlainObject(obj.usage)) this.usage(obj.usage);
    if (kept.length === 0 && !isPlainObject(obj.usage)) return null;
    obj.choices = kept;
    return `data: ${JSON.stringify(obj)}`;
  }

  /** Rewrites one choice in place; false = drop it (nothing left in it). */
  private choice(c: Record<string, unknown>): boolean {
    const d = isPlainObject(c.delta) ? c.delta : null;
    if (d !== null) delete d.role;
    const key = d !== null ? 'content' : 'text';
    const holder = d ?? c;
    const text = typeof holder[key] === 'string' ? (holder[key] as string) : '';
    if (this.tail.length > 0 && text.length > 0) {
      const cut = this.spanningStop(text);
      if (cut !== null) {
        holder[key] = text.slice(0, cut.at);
        c.finish_reason = 'stop';
        c.stop_reason = cut.stop;
        this.ended = true;
        return true;
      }
    }
    const empty =
      text.length === 0 &&
      (c.finish_reason === null || c.finish_reason === undefined) &&
      (c.logprobs === null || c.logprobs === undefined) &&
      (d === null || Object.keys(d).every((k) => k === 'content'));
    if (!empty && text.length > 0 && this.onFirstOutput !== null) {
      this.onFirstOutput();
      this.onFirstOutput = null;
    }
    return !empty;
  }

  /**
   * A stop string that starts in the sent tail and ends in the new text (the engine of the new leg
   * only sees its own output). Returns where the new text is cut (the stop string excluded, as the
   * engines do by default) — its start lies before the seam, so nothing new is sent.
   */
  private spanningStop(text: string): { at: number; stop: string } | null {
    this.fresh += text;
    const window = this.tail + this.fresh;
    for (const s of this.stops) {
      const i = window.indexOf(s);
      if (i >= 0 && i < this.tail.length && i + s.length > this.tail.length) return { at: 0, stop: s };
    }
    if (this.fresh.length >= this.maxStop - 1) this.tail = ''; // past the seam: the engine checks alone
    return null;
  }

  private usage(u: Record<string, unknown>): void {
    const n = this.sent.tokens;
    const prompt = typeof u.prompt_tokens === 'number' ? Math.max(0, u.prompt_tokens - n) : null;
    const completion = typeof u.completion_tokens === 'number' ? u.completion_tokens + n : null;
    if (prompt !== null) u.prompt_tokens = prompt;
    if (completion !== null) u.completion_tokens = completion;
    if (prompt !== null && completion !== null) u.total_tokens = prompt + completion;
    const details = u.prompt_tokens_details;
    if (prompt !== null && isPlainObject(details) && typeof details.cached_tokens === 'number')
      details.cached_tokens = Math.min(details.cached_tokens, prompt);
  }
}

/** Client stop strings (`stop`: a string or a list). */
export function stopStrings(body: Record<string, unknown>): string[] {
  const s = body.stop;
  if (typeof s === 'string') return s.length > 0 ? [s] : [];
  if (Array.isArray(s)) return s.filter((x): x is string => typeof x === 'string' && x.length > 0);
  return [];
}
