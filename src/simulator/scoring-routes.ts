import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import { inputsOf, poolingUsage, vectorEncoder } from './embeddings-route.js';
import { parseModelBody } from './model-body.js';
import type { SimOptions } from './options.js';
import { RequestError } from './request-error.js';
import { tokenize } from './tokens.js';

/**
 * The simulator's relevance of a document to a query: the Jaccard similarity of their token sets, in
 * [0, 1] like a cross-encoder's sigmoid score. Deterministic, and a document sharing more of the
 * query's tokens ranks higher, so a reranked order is predictable in tests.
 */
export function relevance(query: readonly number[], doc: readonly number[]): number {
  const q = new Set(query);
  const d = new Set(doc);
  let shared = 0;
  for (const t of q) if (d.has(t)) shared++;
  const union = q.size + d.size - shared;
  return union === 0 ? 0 : shared / union;
}

const vllmId = (prefix: string): string => `${prefix}-${randomUUID().replace(/-/g, '')}`;

/** A `ScoreInputs` value of the text form: a string or a non-empty list of strings. */
function texts(v: unknown, field: string): string[] {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')) return v as string[];
  throw new RequestError(400, `'${field}' must be a string or a non-empty list of strings`, field);
}

/**
 * vLLM's `POST /rerank` (also `/v1/rerank`, `/v2/rerank`; vllm/entrypoints/pooling/score/api_router.py
 * `do_rerank`, Jina's rerank API): `RerankRequest {query, documents, top_n}` →
 * `RerankResponse {id:"rerank-…", model, usage:{prompt_tokens, total_tokens}, results:[{index,
 * document:{text, multi_modal:null}, relevance_score}]}` (vllm/entrypoints/pooling/scoring/protocol.py,
 * commit 004706d8). Results are ordered by score, highest first, and cut to `top_n` when it is above
 * 0 (`ServingScores.do_rerank` / `request_output_to_rerank_response`). Text documents only: the
 * simulator has no multimodal inputs.
 */
export function handleRerank(opts: SimOptions, res: ServerResponse, text: string): void {
  const body = parseModelBody(opts, text);
  if (typeof body.query !== 'string')
    throw new RequestError(400, "'query' must be a string (the simulator scores text only)", 'query');
  const documents = texts(body.documents, 'documents');
  const topN = body.top_n ?? 0;
  if (typeof topN !== 'number' || !Number.isInteger(topN) || topN < 0)
    throw new RequestError(400, "'top_n' must be a non-negative integer", 'top_n');
  const query = tokenize(body.query);
  let promptTokens = 0;
  const results = documents.map((doc, index) => {
    const ids = tokenize(doc);
    promptTokens += query.length + ids.length;
    return { index, document: { text: doc, multi_modal: null }, relevance_score: relevance(query, ids) };
  });
  results.sort((a, b) => b.relevance_score - a.relevance_score);
  sendJson(res, 200, {
    id: vllmId('rerank'),
    model: opts.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    results: topN > 0 ? results.slice(0, topN) : results,
  });
}

/** The pair fields of vLLM's `ScoreRequest` forms, first match wins (scoring/protocol.py `ScoreRequest`). */
const SCORE_FORMS: readonly (readonly [string, string])[] = [
  ['queries', 'documents'],
  ['queries', 'items'],
  ['data_1', 'data_2'],
  ['text_1', 'text_2'],
];

/**
 * vLLM's `POST /score` (also `/v1/score`; score/api_router.py `create_score`): one of the pair forms
 * `text_1`/`text_2`, `queries`/`documents`, `queries`/`items`, `data_1`/`data_2`; a single first input
 * is scored against every second one, otherwise they pair up by position and must be as many
 * (`ServingScores._cross_encoding_score`, score/utils.py `validate_score_input`). Answer
 * `ScoreResponse {id:"score-…", object:"list", created, model, data:[{index, object:"score", score}],
 * usage}` (scoring/protocol.py).
 */
export function handleScore(opts: SimOptions, res: ServerResponse, text: string): void {
  const body = parseModelBody(opts, text);
  const form = SCORE_FORMS.find(([a, b]) => body[a] !== undefined && body[b] !== undefined);
  if (form === undefined)
    throw new RequestError(400, "a score request needs 'text_1' and 'text_2' (or queries/documents)");
  const first = texts(body[form[0]], form[0]).map(tokenize);
  const second = texts(body[form[1]], form[1]).map(tokenize);
  if (first.length !== 1 && first.length !== second.length)
    throw new RequestError(
      400,
      `'${form[0]}' must hold one input or as many as '${form[1]}' (${second.length})`,
      form[0],
    );
  let promptTokens = 0;
  const data = second.map((ids, index) => {
    const q = first.length === 1 ? first[0]! : first[index]!;
    promptTokens += q.length + ids.length;
    return { index, object: 'score', score: relevance(q, ids) };
  });
  sendJson(res, 200, {
    id: vllmId('score'),
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: opts.model,
    data,
    usage: poolingUsage(promptTokens),
  });
}

/**
 * vLLM's `POST /pooling` (vllm/entrypoints/pooling/pooling/api_router.py, completion form
 * `PoolingCompletionRequest`): `input` as for embeddings; answer `PoolingResponse {id:"pool-…",
 * object:"list", created, model, data:[{index, object:"pooling", data}], usage}`
 * (pooling/pooling/protocol.py, commit 01cfbaf6). The simulator pools as its embedding model does:
 * `data` is the input's embedding vector. The chat form (`messages`) is refused.
 */
export function handlePooling(opts: SimOptions, res: ServerResponse, text: string): void {
  const body = parseModelBody(opts, text);
  if (body.messages !== undefined)
    throw new RequestError(400, 'the chat form of /pooling is not supported by the simulator', 'messages');
  const inputs = inputsOf(body.input);
  const encode = vectorEncoder(body);
  let promptTokens = 0;
  const data = inputs.map((ids, index) => {
    promptTokens += ids.length;
    return { index, object: 'pooling', data: encode(ids) };
  });
  sendJson(res, 200, {
    id: vllmId('pool'),
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: opts.model,
    data,
    usage: poolingUsage(promptTokens),
  });
}
