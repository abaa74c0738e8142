import type { ServerResponse } from 'node:http';

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

export function sseError(message: string, type: string, code: number): string {
  return `data: ${JSON.stringify({ error: { message, type, param: null, code } })}\n\n`;
}

/**
 * Writes one SSE event as its own socket write. Node's http corks on a write for the rest of the tick
 * unless the socket is already corked — Node 20 and 22 cork the socket, Node 24 the response, whose
 * uncork then joins everything written in the tick into one HTTP chunk — so events written in one
 * tick would leave together. Corking the socket first keeps Node from corking anything; uncorking
 * after the write sends this event now. vLLM's server yields one `data:` line per chunk
 * (chat_completion/serving.py `chat_completion_stream_generator`) and its ASGI server sends each
 * yield as its own write, as SGLang's does (serving_chat.py `_generate_chat_stream`); a client that
 * parses each received chunk as one event (vllm-ascend's proxies) relies on it. Returns
 * `res.write`'s backpressure answer. (Under backpressure the kernel may still join writes, for
 * engines too.)
 */
export function writeEvent(res: ServerResponse, event: string): boolean {
  if (event.length === 0) return true;
  const socket = res.socket;
  socket?.cork();
  const ok = res.write(event);
  socket?.uncork();
  return ok;
}

/** Writes each event on its own (writeEvent), then ends the response. */
export function endWithEvents(res: ServerResponse, ...events: string[]): void {
  for (const e of events) writeEvent(res, e);
  res.end();
}
