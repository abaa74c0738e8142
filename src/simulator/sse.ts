import { OUTPUT_VOCAB } from './tokens.js';

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function makeUsage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

export const SSE_DONE = 'data: [DONE]\n\n';

/** How a choice ends: finish_reason and vLLM's `stop_reason` (the matched stop string, "recomputed", or null). */
export interface Ending {
  finish: string;
  stopReason: string | null;
}

function endJson(end: Ending): string {
  return `"${end.finish}","stop_reason":${end.stopReason === null ? 'null' : JSON.stringify(end.stopReason)}`;
}

/**
 * SSE chunk templates framed like vLLM's OpenAI server: `data: {json}\n\n`. The per-request prefix
 * (id, object, created, model) is built once; a token chunk is prefix + pre-escaped word + suffix,
 * so no JSON.stringify runs per token.
 *
 * chat:       {"id","object":"chat.completion.chunk","created","model","choices":[{"index":0,"delta":{"content":W},"logprobs":null,"finish_reason":null}]}
 * completion: {"id","object":"text_completion","created","model","choices":[{"index":0,"text":W,"logprobs":null,"finish_reason":null,"stop_reason":null}]}
 * The last token chunk carries finish_reason and stop_reason; with return_token_ids each
 * choice has `token_ids:[id]` and the first chunk has top-level `prompt_token_ids`.
 */
export class ChunkWriter {
  private readonly head: string;
  private readonly chat: boolean;

  constructor(
    kind: 'chat' | 'completion',
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly withTokenIds: boolean,
  ) {
    this.chat = kind === 'chat';
    const object = this.chat ? 'chat.completion.chunk' : 'text_completion';
    this.head = `data: {"id":${JSON.stringify(id)},"object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":[{"index":0,`;
  }

  /** Chat: the role chunk (always first). Completion: '' (the first token chunk is first). */
  first(promptIds: readonly number[] | null): string {
    const pti = promptIds ? `,"prompt_token_ids":[${promptIds.join(',')}]` : '';
    if (!this.chat) {
      return pti ? `${this.head}"text":"","logprobs":null,"finish_reason":null}]${pti}}\n\n` : '';
    }
    return `${this.head}"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]${pti}}\n\n`;
  }

  token(word: number, end: Ending | null): string {
    const w = OUTPUT_VOCAB.json[word]!;
    const tid = this.withTokenIds ? `,"token_ids":[${OUTPUT_VOCAB.ids[word]!}]` : '';
    const fin = end === null ? 'null' : endJson(end);
    if (this.chat)
      return `${this.head}"delta":{"content":${w}},"logprobs":null,"finish_reason":${fin}${tid}}]}\n\n`;
    return `${this.head}"text":${w},"logprobs":null,"finish_reason":${fin}${end === null ? ',"stop_reason":null' : ''}${tid}}]}\n\n`;
  }

  /** A finish chunk without a token (output ended before any token, or vllm-ascend's recompute frame). */
  finishOnly(end: Ending): string {
    const tid = this.withTokenIds ? ',"token_ids":[]' : '';
    if (this.chat) {
      return `${this.head}"delta":{"content":""},"logprobs":null,"finish_reason":${endJson(end)}${tid}}]}\n\n`;
    }
    return `${this.head}"text":"","logprobs":null,"finish_reason":${endJson(end)}${tid}}]}\n\n`;
  }

  usage(u: Usage): string {
    const object = this.chat ? 'chat.completion.chunk' : 'text_completion';
    return `data: ${JSON.stringify({ id: this.id, object, created: this.created, model: this.model, choices: [], usage: u })}\n\n`;
  }
}

export function sseError(message: string, type: string, code: number): string {
  return `data: ${JSON.stringify({ error: { message, type, param: null, code } })}\n\n`;
}
