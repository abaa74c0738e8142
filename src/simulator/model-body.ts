import { isPlainObject } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import type { SimOptions } from './options.js';
import { parseJsonPreservingRoom } from './request-body.js';
import { RequestError } from './request-error.js';

/**
 * The body of a vLLM non-generation route (embeddings, pooling, score, rerank, detokenize): a JSON
 * object whose optional `model` must be the served one. vLLM's `OpenAIServing._check_model` answers
 * an unknown model with 404 (vllm/entrypoints/openai/engine/serving.py, main 2026).
 */
export function parseModelBody(opts: SimOptions, text: string): Record<string, unknown> {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok) throw new HttpError(400, parsed.message);
  const body = parsed.value;
  if (!isPlainObject(body)) throw new RequestError(400, 'request body must be a JSON object');
  if (body.model !== undefined && body.model !== null && body.model !== opts.model)
    throw new HttpError(404, `The model \`${String(body.model)}\` does not exist.`, { param: 'model' });
  return body;
}
