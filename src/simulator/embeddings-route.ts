import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import { parseModelBody } from './model-body.js';
import type { SimOptions } from './options.js';
import { RequestError } from './request-error.js';
import { prng, tokenize } from './tokens.js';

/** The simulator's embedding size when the request sets no `dimensions`. */
export const DEFAULT_EMBEDDING_DIMENSIONS = 384;

/**
 * vLLM's `POST /v1/embeddings`, completion form (vllm/entrypoints/pooling/embed/protocol.py
 * `EmbeddingCompletionRequest` / `EmbeddingResponse`, index commit ff8d577a): `input` a string, a
 * list of strings, a token-id list or a list of them; `encoding_format` `float` | `base64`
 * (float32, little-endian — the native order of the x86/ARM hosts vLLM runs on); `dimensions`;
 * `normalize` (default true). Answer `{id:"embd-<uuid>", object:"list", created, model,
 * data:[{index, object:"embedding", embedding}], usage:{prompt_tokens, total_tokens,
 * completion_tokens:0, prompt_tokens_details:null}}`. The vector is a deterministic function of the
 * input's tokens (a seeded draw, unit length when normalised): equal inputs embed equally.
 */
export function handleEmbeddings(opts: SimOptions, res: ServerResponse, text: string): void {
  const body = parseModelBody(opts, text);
  if (body.messages !== undefined)
    throw new RequestError(
      400,
      'the chat form of /v1/embeddings is not supported by the simulator',
      'messages',
    );
  const inputs = inputsOf(body.input);
  const encode = vectorEncoder(body);
  let promptTokens = 0;
  const data = inputs.map((ids, index) => {
    promptTokens += ids.length;
    return { index, object: 'embedding', embedding: encode(ids) };
  });
  sendJson(res, 200, {
    id: `embd-${randomUUID().replace(/-/g, '')}`,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: opts.model,
    data,
    usage: poolingUsage(promptTokens),
  });
}

/**
 * vLLM's `UsageInfo` of a pooling answer (vllm/entrypoints/openai/engine/protocol.py `UsageInfo`):
 * no completion tokens, `prompt_tokens_details` null.
 */
export function poolingUsage(promptTokens: number): Record<string, unknown> {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens,
    completion_tokens: 0,
    prompt_tokens_details: null,
  };
}

/**
 * Token ids → the vector in the request's `encoding_format` (`float` list, or `base64` of float32
 * little-endian), `dimensions` long, unit length unless `normalize: false` — the embeddings and the
 * pooling routes read the same fields (vllm/entrypoints/pooling/base/protocol.py `EmbedRequestMixin`,
 * `EncodingRequestMixin`).
 */
export function vectorEncoder(body: Record<string, unknown>): (ids: readonly number[]) => number[] | string {
  const dims = body.dimensions ?? DEFAULT_EMBEDDING_DIMENSIONS;
  if (typeof dims !== 'number' || !Number.isInteger(dims) || dims < 1 || dims > 65536)
    throw new RequestError(400, "'dimensions' must be an integer in 1..65536", 'dimensions');
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64')
    throw new RequestError(400, '\'encoding_format\' must be "float" or "base64"', 'encoding_format');
  const normalize = body.normalize !== false;
  return (ids) => {
    const v = embeddingOf(ids, dims, normalize);
    return format === 'float' ? Array.from(v) : Buffer.from(v.buffer).toString('base64');
  };
}

/** Each input's token ids (the embeddings and pooling `input` forms). */
export function inputsOf(input: unknown): number[][] {
  const isIds = (v: unknown): v is number[] =>
    Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && (t as number) >= 0);
  let out: number[][] | null = null;
  if (typeof input === 'string') out = [tokenize(input)];
  else if (isIds(input)) out = [input];
  else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'string'))
    out = (input as string[]).map(tokenize);
  else if (Array.isArray(input) && input.length > 0 && input.every(isIds)) out = input as number[][];
  if (out === null || out.some((ids) => ids.length === 0))
    throw new RequestError(
      400,
      "'input' must be a non-empty string, token-id list, or a list of them",
      'input',
    );
  return out;
}

/** A deterministic vector for `ids`: seeded by a hash of the ids, unit length when `normalize`. */
export function embeddingOf(ids: readonly number[], dims: number, normalize: boolean): Float32Array {
  let h = 0x811c9dc5;
  for (const id of ids) h = Math.imul(h ^ id, 0x01000193);
  const r = prng(h >>> 0);
  const v = new Float32Array(dims);
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    v[i] = r() * 2 - 1;
    norm += v[i]! * v[i]!;
  }
  if (normalize && norm > 0) {
    const k = 1 / Math.sqrt(norm);
    for (let i = 0; i < dims; i++) v[i] = v[i]! * k;
  }
  return v;
}
