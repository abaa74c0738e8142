import { isPlainObject } from '../../../common/http.js';
import {
  emptySummary,
  summarizeObject,
  summarizeTextOnly,
  type SentLog,
  type SentSummary,
} from '../migration/sent-so-far.js';
import type { ApiKind } from '../../internal-request/client-request.js';
import { FrameTemplate } from './frame-template.js';

/** One choice as its stream frames add up (a migratable request has one: `n` = 1); its text is the summary's. */
interface ChoiceSoFar {
  /** The reasoning key the frames used (`reasoning_content` or `reasoning`) and its text. */
  reasoningKey: string | null;
  reasoning: string;
  /** Chat: `logprobs.content` entries; completions: the four parallel lists. Null: none sent. */
  logprobs: Record<string, unknown[]> | null;
  finish: unknown;
  stop: unknown;
  tokenIds: number[] | null;
  promptTokenIds: unknown;
}

/**
 * Relayed frame bytes an assembled answer holds before folding them into its state (and dropping
 * them). Above any common answer (16 tokens are ~4 KiB), so those fold once, at `[DONE]`, at the cost
 * they always had; a 30,000-token answer holds this much plus what its JSON needs, not every frame
 * (~45× the JSON).
 */
export const FOLD_BYTES = 256 * 1024;

/**
 * The non-stream answer an engine would have given, from the stream frames of the same request
 * (`stream: true`, `stream_options.include_usage`) as Motor relayed them (seam-joined across a
 * migration), folded batch by batch as they arrive: what the answer's JSON needs (text, reasoning,
 * logprobs, token ids, the first frame's head, usage) and what a continuation needs (the
 * `SentSummary`, by the same rules as a stream's: sent-so-far.ts). The shape is vLLM's non-stream one
 * for the keys a stream carries (vLLM main, `ChatCompletionResponse`,
 * vllm/entrypoints/openai/chat_completion/protocol.py; null/empty keys a stream never carries are
 * left out, docs/migration.md): chat `{id, object: "chat.completion", created, model, choices:
 * [{index, message: {role, content}, logprobs, finish_reason, stop_reason}], usage}`, completions
 * `{…, object: "text_completion", choices: [{index, text, logprobs, finish_reason, stop_reason}]}`;
 * `token_ids` / `prompt_token_ids` where the frames had them.
 */
export class AnswerFold implements SentLog {
  readonly overflow = false;
  private readonly a: Assembly = { head: null, usage: null, promptTokenIds: undefined };
  private readonly c = emptyChoice();
  private readonly s = emptySummary();
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(private readonly kind: ApiKind) {}

  /** Frame bytes held, not yet folded (at most about `FOLD_BYTES` plus one chunk). */
  get retainedBytes(): number {
    return this.pendingBytes;
  }

  record(buf: Buffer): void {
    this.pending.push(buf);
    this.pendingBytes += buf.length;
    if (this.pendingBytes >= FOLD_BYTES) this.foldComplete();
  }

  /** What was sent so far, for a continuation (a copy: later frames fold into this state). */
  summary(): SentSummary {
    this.foldComplete();
    const s = this.s;
    return { ...s, tokenIds: s.tokenIds === null ? null : [...s.tokenIds] };
  }

  /** The answer, once every frame is in. Null: no frame of an answer (nothing to assemble). */
  answer(): Record<string, unknown> | null {
    this.fold(this.take(this.pendingBytes));
    const { a, c, kind } = this;
    const head = a.head;
    if (head === null) return null;
    const choice: Record<string, unknown> = { index: 0 };
    if (kind === 'chat') {
      const message: Record<string, unknown> = { role: 'assistant', content: this.s.text };
      if (c.reasoningKey !== null) message[c.reasoningKey] = c.reasoning;
      choice.message = message;
      choice.logprobs = c.logprobs === null ? null : { content: c.logprobs.content ?? [] };
    } else {
      choice.text = this.s.text;
      choice.logprobs = c.logprobs;
    }
    choice.finish_reason = c.finish;
    choice.stop_reason = c.stop;
    if (c.tokenIds !== null) choice.token_ids = c.tokenIds;
    if (c.promptTokenIds !== undefined) choice.prompt_token_ids = c.promptTokenIds;
    const out: Record<string, unknown> = {
      id: head.id,
      object: kind === 'chat' ? 'chat.completion' : 'text_completion',
      created: head.created,
      model: head.model,
      choices: [choice],
      usage: a.usage,
    };
    if (a.promptTokenIds !== undefined) out.prompt_token_ids = a.promptTokenIds;
    return out;
  }

  /** Folds the complete frames held; a frame cut by a chunk boundary waits for its rest. */
  private foldComplete(): void {
    if (this.pendingBytes === 0) return;
    const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    const end = all.lastIndexOf(SEP);
    if (end < 0) {
      this.pending = [all];
      return;
    }
    // the partial frame is copied out: a view would keep the whole batch alive
    const rest = end + 2 < all.length ? [Buffer.from(all.subarray(end + 2))] : [];
    this.pending = rest;
    this.pendingBytes = rest.length === 0 ? 0 : rest[0]!.length;
    this.fold(all.subarray(0, end + 2));
  }

  private take(bytes: number): Buffer {
    const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, bytes);
    this.pending = [];
    this.pendingBytes = 0;
    return all;
  }

  private fold(frames: Buffer): void {
    forEachFrame(this.kind, frames, this.a, this.c, this.s);
  }
}

/** The answer from a whole stream's frames at once (tests, and one-shot callers). */
export function assembleAnswer(kind: ApiKind, frames: Buffer): Record<string, unknown> | null {
  const fold = new AnswerFold(kind);
  fold.record(frames);
  return fold.answer();
}

const emptyChoice = (): ChoiceSoFar => ({
  reasoningKey: null,
  reasoning: '',
  logprobs: null,
  finish: null,
  stop: null,
  tokenIds: null,
  promptTokenIds: undefined,
});

/** The answer's top-level keys so far. */
interface Assembly {
  head: Record<string, unknown> | null;
  usage: unknown;
  promptTokenIds: unknown;
}

/** One parsed frame's contribution (its text and the continuation's share: `summarizeObject`). */
function addFrame(a: Assembly, c: ChoiceSoFar, s: SentSummary, obj: unknown): void {
  summarizeObject(obj, s);
  if (!isPlainObject(obj) || !Array.isArray(obj.choices)) return;
  a.head ??= obj;
  if (isPlainObject(obj.usage)) a.usage = obj.usage;
  if (obj.prompt_token_ids !== undefined) a.promptTokenIds = obj.prompt_token_ids;
  for (const ch of obj.choices) if (isPlainObject(ch)) addChoice(c, ch);
}

function addChoice(c: ChoiceSoFar, ch: Record<string, unknown>): void {
  const d = isPlainObject(ch.delta) ? ch.delta : null;
  if (d !== null) {
    for (const key of ['reasoning_content', 'reasoning']) {
      if (typeof d[key] !== 'string') continue;
      c.reasoningKey ??= key;
      c.reasoning += d[key] as string;
    }
  }
  if (isPlainObject(ch.logprobs)) {
    c.logprobs ??= {};
    for (const [k, v] of Object.entries(ch.logprobs)) if (Array.isArray(v)) (c.logprobs[k] ??= []).push(...v);
  }
  if (ch.finish_reason !== null && ch.finish_reason !== undefined) {
    c.finish = ch.finish_reason;
    c.stop = ch.stop_reason ?? null;
  }
  if (Array.isArray(ch.token_ids)) (c.tokenIds ??= []).push(...(ch.token_ids as number[]));
  if (ch.prompt_token_ids !== undefined) c.promptTokenIds = ch.prompt_token_ids;
}

const SEP = Buffer.from('\n\n');
const DATA_OBJECT = Buffer.from('data: {');
/** Templates learnt per answer, at most (a stream's frames take one or two shapes). */
const MAX_TEMPLATES = 4;

/**
 * Each `data:` frame's JSON payload, in order, added to the answer; a frame that is not a JSON
 * object (`[DONE]`, a comment) or does not parse is skipped. Most frames of an answer differ from
 * each other only in their text (`{"id":…,"choices":[{"index":0,"delta":{"content":"…"},…}]}`):
 * once two frames in a row of that kind are parsed, they become a template (frame-template.ts) and a later frame
 * with the same bytes around its text costs one pass over its bytes and a decode of the text alone —
 * the same answer as a parse of the whole frame (issue 19: the parse of every frame was 12 % of the
 * coordinator's CPU for a non-stream answer from a streamed leg).
 */
function forEachFrame(kind: ApiKind, frames: Buffer, a: Assembly, c: ChoiceSoFar, s: SentSummary): void {
  const key = kind === 'chat' ? CONTENT_KEY : TEXT_KEY;
  /** In frame order: a templated frame's text, or the index of a frame in `payloads`. */
  const items: Array<string | number> = [];
  const payloads: string[] = [];
  let template: FrameTemplate | null = null;
  let candidate: FrameTemplate | null = null;
  let learnt = 0;
  let start = 0;
  const n = frames.length;
  while (start < n) {
    if (template !== null) {
      const text = template.textAt(frames, start);
      if (text !== null) {
        items.push(text);
        start = template.next;
        continue;
      }
    }
    let end = frames.indexOf(SEP, start);
    if (end < 0) end = n;
    const from = start;
    start = end + 2;
    const payload = payloadOf(frames, from, end);
    if (payload === null) continue;
    items.push(payloads.length);
    payloads.push(payload);
    if (learnt < MAX_TEMPLATES && startsWith(frames, from, end, DATA_OBJECT)) {
      // a shape seen twice in a row becomes the template (a chat's role frame and the finish
      // frame, seen once each, cost no probe)
      const seen = FrameTemplate.around(frames.subarray(from, end), key);
      if (seen !== null && candidate !== null && seen.sameAs(candidate)) {
        learnt++;
        if (onlyText(seen)) template = seen;
      }
      candidate = seen;
    }
  }
  const objs = parseAll(payloads);
  for (const item of items) {
    if (typeof item === 'string') summarizeTextOnly(item, s);
    else addFrame(a, c, s, objs[item]);
  }
}

const startsWith = (buf: Buffer, from: number, end: number, head: Buffer): boolean =>
  end - from >= head.length && buf.compare(head, 0, head.length, from, from + head.length) === 0;

const CONTENT_KEY = Buffer.from('"content":');
const TEXT_KEY = Buffer.from('"text":');

/**
 * Whether frames of this template contribute their text and nothing else — checked by adding the
 * template's probe frame to an empty answer with `addFrame` itself, so the rule of what a frame
 * contributes stays in one place.
 */
function onlyText(template: FrameTemplate): boolean {
  let probe: unknown;
  try {
    probe = JSON.parse(template.probe());
  } catch {
    return false;
  }
  const a: Assembly = { head: null, usage: null, promptTokenIds: undefined };
  const c = emptyChoice();
  const s = emptySummary();
  addFrame(a, c, s, probe);
  const textOnly = emptySummary();
  summarizeTextOnly(FrameTemplate.PROBE, textOnly);
  return (
    a.usage === null &&
    a.promptTokenIds === undefined &&
    s.text === textOnly.text &&
    s.tokens === textOnly.tokens &&
    s.tokenIds === textOnly.tokenIds &&
    !s.finished &&
    s.unresumable === null &&
    c.reasoningKey === null &&
    c.logprobs === null &&
    c.finish === null &&
    c.tokenIds === null &&
    c.promptTokenIds === undefined
  );
}

/**
 * The payloads parsed in one `JSON.parse` of an array (several times faster than a parse per frame);
 * should that fail (a malformed frame) or not give one value per payload, each is parsed on its own
 * and a bad one is undefined (skipped).
 */
function parseAll(payloads: string[]): unknown[] {
  try {
    const all = JSON.parse(`[${payloads.join(',')}]`) as unknown[];
    if (all.length === payloads.length) return all;
  } catch {
    // below
  }
  return payloads.map((p) => {
    try {
      return JSON.parse(p) as unknown;
    } catch {
      return undefined;
    }
  });
}

/** The JSON object text of one `data:` frame (trimmed as a client would), else null. */
function payloadOf(frames: Buffer, from: number, end: number): string | null {
  const frame = frames.toString('utf8', from, end).trim();
  if (!frame.startsWith('data:')) return null;
  const json = frame.slice(5).trim();
  return json.startsWith('{') ? json : null;
}
