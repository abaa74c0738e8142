import { isPlainObject } from '../../common/http.js';
import type { ApiKind } from '../client-request.js';

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
 * `prompt_token_ids` where the frames had them. Parsed once, when the answer is complete.
 * Null: no frame of an answer (nothing to assemble).
 */
export function assembleAnswer(kind: ApiKind, frames: Buffer): Record<string, unknown> | null {
  let head: Record<string, unknown> | null = null;
  let usage: unknown = null;
  let promptTokenIds: unknown = undefined;
  const c: ChoiceSoFar = {
    text: '',
    reasoningKey: null,
    reasoning: '',
    logprobs: null,
    finish: null,
    stop: null,
    tokenIds: null,
    promptTokenIds: undefined,
  };
  for (const obj of parseFrames(frames)) {
    if (!isPlainObject(obj) || !Array.isArray(obj.choices)) continue;
    head ??= obj;
    if (isPlainObject(obj.usage)) usage = obj.usage;
    if (obj.prompt_token_ids !== undefined) promptTokenIds = obj.prompt_token_ids;
    for (const ch of obj.choices) if (isPlainObject(ch)) addChoice(c, ch);
  }
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
    usage,
  };
  if (promptTokenIds !== undefined) out.prompt_token_ids = promptTokenIds;
  return out;
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

/**
 * The JSON payloads of `data:` frames, parsed in one `JSON.parse` of an array (several times faster
 * than a parse per frame); a frame that is not JSON (`[DONE]`, a comment) is skipped. Should the
 * joined text not parse (a malformed frame), each frame is parsed on its own and bad ones skipped.
 */
function parseFrames(frames: Buffer): unknown[] {
  const payloads: string[] = [];
  for (const raw of frames.toString('utf8').split('\n\n')) {
    const frame = raw.trim();
    if (!frame.startsWith('data:')) continue;
    const json = frame.slice(5).trim();
    if (json.startsWith('{')) payloads.push(json);
  }
  try {
    return JSON.parse(`[${payloads.join(',')}]`) as unknown[];
  } catch {
    return payloads.flatMap((p) => {
      try {
        return [JSON.parse(p) as unknown];
      } catch {
        return [];
      }
    });
  }
}
