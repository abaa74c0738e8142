import { isPlainObject } from '../../../common/http.js';
import type { ApiKind } from '../../internal-request/client-request.js';
import type { SentSummary } from './sent-so-far.js';

/**
 * Why a request's answer cannot be continued exactly on another engine, from the request alone
 * (null: it can). Decided from the engines' behaviour (docs/migration.md):
 * - several choices (`n`, `best_of` > 1): one continuation prompt cannot resume them all;
 * - structured output (`response_format` other than text, `guided_*`, `structured_outputs`): the
 *   grammar starts again at the first output token of the new request, not mid-document;
 * - tools the model may call: the tool parser starts again on the continuation's output;
 * - `echo`, `suffix`, `prompt_logprobs`: they describe the prompt, which the continuation changes;
 * - `stream_options.continuous_usage_stats`: per-frame usage would count the new prompt.
 */
export function staticRefusal(kind: ApiKind, body: Record<string, unknown>): string | null {
  if (typeof body.n === 'number' && body.n > 1) return 'n > 1';
  if (typeof body.best_of === 'number' && body.best_of > 1) return 'best_of > 1';
  const rf = body.response_format;
  if (isPlainObject(rf) && rf.type !== 'text') return 'response_format';
  for (const k of ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'structured_outputs'])
    if (body[k] !== undefined && body[k] !== null) return k;
  if (Array.isArray(body.tools) && body.tools.length > 0 && body.tool_choice !== 'none') return 'tools';
  if (body.echo === true) return 'echo';
  if (typeof body.suffix === 'string') return 'suffix';
  if (body.prompt_logprobs !== undefined && body.prompt_logprobs !== null) return 'prompt_logprobs';
  const so = body.stream_options;
  if (isPlainObject(so) && so.continuous_usage_stats === true) return 'continuous_usage_stats';
  if (kind === 'completion' && Array.isArray(body.prompt) && body.prompt.length > 1 && !isIdList(body.prompt))
    return 'several prompts';
  return null;
}

function isIdList(p: unknown[]): boolean {
  return p.every((t) => typeof t === 'number');
}

/** Limits reduced by what was generated into `out`; false when nothing is left to generate. */
function reducedLimits(body: Record<string, unknown>, out: Record<string, unknown>, sent: number): boolean {
  for (const k of ['max_tokens', 'max_completion_tokens']) {
    const v = body[k];
    if (typeof v !== 'number') continue;
    if (v - sent <= 0) return false;
    out[k] = v - sent;
  }
  if (typeof body.min_tokens === 'number') out.min_tokens = Math.max(0, body.min_tokens - sent);
  return true;
}

export type Continuation =
  | { kind: 'body'; body: Record<string, unknown> }
  /** max_tokens already reached: the answer ends with finish_reason "length". */
  | { kind: 'complete' }
  | { kind: 'refused'; reason: string };

/**
 * The body of the next attempt: the original prompt plus everything the client already has.
 * Chat: an assistant message with the partial content, `continue_final_message: true`,
 * `add_generation_prompt: false` (vLLM and SGLang render the conversation with the final message
 * left open). Completions: prompt ids + output ids when the stream carried ids (exact), else prompt
 * text + output text.
 */
export function continuationBody(
  kind: ApiKind,
  body: Record<string, unknown>,
  sent: SentSummary,
): Continuation {
  if (sent.unresumable !== null) return { kind: 'refused', reason: sent.unresumable };
  const out: Record<string, unknown> = { ...body };
  if (!reducedLimits(body, out, sent.tokens)) return { kind: 'complete' };
  if (kind === 'chat') {
    const msgs = Array.isArray(body.messages) ? body.messages : [];
    const last = msgs[msgs.length - 1];
    if (body.continue_final_message === true) {
      // the client's own prefill: the answer continues its final message
      if (!isPlainObject(last) || typeof last.content !== 'string')
        return { kind: 'refused', reason: 'a final message without string content' };
      out.messages = [...msgs.slice(0, -1), { ...last, content: last.content + sent.text }];
    } else {
      out.messages = [...msgs, { role: 'assistant', content: sent.text }];
    }
    out.continue_final_message = true;
    out.add_generation_prompt = false;
    return { kind: 'body', body: out };
  }
  const prompt = Array.isArray(body.prompt) && body.prompt.length === 1 ? body.prompt[0] : body.prompt;
  if (Array.isArray(prompt) && isIdList(prompt)) {
    if (sent.tokenIds === null)
      return { kind: 'refused', reason: 'a token-id prompt whose stream carried no token ids' };
    out.prompt = [...(prompt as number[]), ...sent.tokenIds];
  } else if (typeof prompt === 'string') {
    // (a text prompt has no ids here: the coordinator does not tokenize)
    out.prompt = prompt + sent.text;
  } else {
    return { kind: 'refused', reason: 'an unsupported prompt' };
  }
  return { kind: 'body', body: out };
}
