import { isPlainObject } from '../../../common/http.js';
import type { ApiKind } from '../../internal-request/client-request.js';
import { FrameTemplate } from './frame-template.js';

/** One choice as its stream frames add up (a migratable request has one: `n` = 1). */
interface ChoiceSoFar {
  text: string;
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
 * The non-stream answer an engine would have given, from the stream frames of the same request
 * (`stream: true`, `stream_options.include_usage`) as Motor relayed them (seam-joined across a
 * migration). The shape is vLLM's non-stream one for the keys a stream carries (vLLM main,
 * `ChatCompletionResponse`, vllm/entrypoints/openai/chat_completion/protocol.py; null/empty keys a
 * stream never carries are left out, docs/migration.md):
 * chat `{id, object: "chat.completion", created, model, choices: [{index, message: {role, content},
 * logprobs, finish_reason, stop_reason}], usage}`, completions `{…, object: "text_completion",
 * choices: [{index, text, logprobs, finish_reason, stop_reason}]}`; `token_ids` /
 * `prompt_token_ids` where the frames had them. Read once, when the answer is complete.
 * Null: no frame of an answer (nothing to assemble).
 */
export function assembleAnswer(kind: ApiKind, frames: Buffer): Record<string, unknown> | null {
  const a: Assembly = { head: null, usage: null, promptTokenIds: undefined };
  const c = emptyChoice();
  forEachFrame(kind, frames, a, c);
  const head = a.head;
  if (head === null) return null;
  const choice: Record<string, unknown> = { index: 0 };
  if (kind === 'chat') {
    const message: Record<string, unknown> = { role: 'assistant', content: c.text };
    if (c.reasoningKey !== null) message[c.reasoningKey] = c.reasoning;
    choice.message = message;
    choice.logprobs = c.logprobs === null ? null : { content: c.logprobs.content ?? [] };
  } else {
    choice.text = c.text;
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

const emptyChoice = (): ChoiceSoFar => ({
  text: '',
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

/** One parsed frame's contribution. */
function addFrame(a: Assembly, c: ChoiceSoFar, obj: unknown): void {
  if (!isPlainObject(obj) || !Array.isArray(obj.choices)) return;
  a.head ??= obj;
  if (isPlainObject(obj.usage)) a.usage = obj.usage;
  if (obj.prompt_token_ids !== undefined) a.promptTokenIds = obj.prompt_token_ids;
  for (const ch of obj.choices) if (isPlainObject(ch)) addChoice(c, ch);
}

function addChoice(c: ChoiceSoFar, ch: Record<string, unknown>): void {
  const d = isPlainObject(ch.delta) ? ch.delta : null;
  const text = d !== null ? d.content : ch.text;
  if (typeof text === 'string') c.text += text;
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
function forEachFrame(kind: ApiKind, frames: Buffer, a: Assembly, c: ChoiceSoFar): void {
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
    if (typeof item === 'string') c.text += item;
    else addFrame(a, c, objs[item]);
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
  addFrame(a, c, probe);
  return (
    a.usage === null &&
    a.promptTokenIds === undefined &&
    c.text === FrameTemplate.PROBE &&
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
