import type { JsonSource } from '../../common/json-splice.js';

/**
 * The internal request every client API is turned into (src/coordinator/apis/), as dispatch, KV routing
 * and the scheduling bridge read it. It lives outside all three so that none of them imports another
 * for the type alone.
 */
export type ApiKind = 'chat' | 'completion';

export interface ClientRequest {
  kind: ApiKind;
  body: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** The client asked for token ids (`return_token_ids`); otherwise they are stripped. */
  wantsTokenIds: boolean;
  /** The bytes `body` was parsed from (gateway): leg bodies are spliced from them (json-splice.ts). */
  source?: JsonSource | null;
}

/**
 * The engine route every leg of a request of `kind` posts to, whichever API the client spoke: vLLM
 * (vllm/entrypoints/openai/api_server.py) and SGLang (sglang/srt/entrypoints/http_server.py) serve the
 * OpenAI routes, and so do the engine proxy and the simulator.
 */
export const ENGINE_PATHS: Readonly<Record<ApiKind, string>> = {
  chat: '/v1/chat/completions',
  completion: '/v1/completions',
};
