import type { IncomingMessage, ServerResponse } from 'node:http';
import { isPlainObject, sendJson } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import type { ChoiceOutput } from './answer.js';
import type { PeerClient } from './peer-client.js';
import { parseGenRequest, parseJsonPreservingRoom, RequestError, type GenRequest } from './request-body.js';
import type { Ending, Usage } from './sse.js';
import { OUTPUT_VOCAB } from './tokens.js';

/**
 * SGLang's native `POST /generate` (sgl-project/sglang python/sglang/srt/entrypoints/http_server.py
 * `generate_request`, io_struct.py `GenerateReqInput`; 2026 index versions), the subset mini_lb and
 * Motor send: `text` or `input_ids`, `sampling_params.{max_new_tokens,min_new_tokens,stop}`, `stream`,
 * `rid`, `bootstrap_host/port/room`. A batch (`text: [..]` or `input_ids: [[..]]`) carries one
 * `rid`/`bootstrap_*` entry per prompt (fixture sglang/mini-lb/generate-request.batch.json).
 */

/** Sampling keys the simulator maps onto its OpenAI-shaped request; the rest are accepted and ignored. */
const SAMPLING_MAP = [
  ['max_new_tokens', 'max_tokens'],
  ['min_new_tokens', 'min_tokens'],
  ['stop', 'stop'],
] as const;

/** Per-prompt keys of a batch: a list has one entry per prompt; a scalar applies to all. */
const PER_PROMPT_KEYS = ['rid', 'bootstrap_host', 'bootstrap_port', 'bootstrap_room'] as const;

/** Parses one (non-batched) `/generate` body into the simulator's request. */
export function parseGenerateRequest(
  value: unknown,
  opts: { model: string; defaultMaxTokens: number; maxModelLen: number },
): GenRequest {
  if (!isPlainObject(value)) throw new RequestError(400, 'request body must be a JSON object');
  const prompt = value.text ?? value.input_ids;
  if (prompt === undefined || prompt === null)
    throw new RequestError(400, "either 'text' or 'input_ids' is required", 'text');
  const sp = value.sampling_params ?? {};
  if (!isPlainObject(sp))
    throw new RequestError(400, "'sampling_params' must be an object", 'sampling_params');
  const mapped: Record<string, unknown> = {
    model: opts.model,
    prompt,
    stream: value.stream ?? false,
    rid: value.rid,
    bootstrap_host: value.bootstrap_host,
    bootstrap_port: value.bootstrap_port,
    bootstrap_room: value.bootstrap_room,
  };
  for (const [from, to] of SAMPLING_MAP) if (sp[from] !== undefined) mapped[to] = sp[from];
  return { ...parseGenRequest('completion', mapped, opts), kind: 'generate' };
}

/** True when the body batches several prompts. */
export function isBatchedGenerate(body: Record<string, unknown>): boolean {
  return Array.isArray(body.text) || (Array.isArray(body.input_ids) && Array.isArray(body.input_ids[0]));
}

/** One single-prompt body per prompt of a batch, each with its own `rid` / `bootstrap_*` entry. */
export function splitGenerateBatch(body: Record<string, unknown>): Record<string, unknown>[] {
  const prompts = (Array.isArray(body.text) ? body.text : body.input_ids) as unknown[];
  if (prompts.length === 0)
    throw new RequestError(400, 'a batched /generate needs at least one prompt', 'text');
  return prompts.map((prompt, i) => {
    const one: Record<string, unknown> = { ...body };
    if (Array.isArray(body.text)) one.text = prompt;
    else one.input_ids = prompt;
    for (const key of PER_PROMPT_KEYS) {
      const v = body[key];
      if (key === 'bootstrap_room' && !Array.isArray(v)) {
        one.bootstrap_room = fannedOutRoom(v, i);
        continue;
      }
      if (!Array.isArray(v)) continue;
      if (v.length !== prompts.length)
        throw new RequestError(400, `'${key}' must have one entry per prompt (${prompts.length})`, key);
      one[key] = v[i];
    }
    return one;
  });
}

/**
 * A scalar `bootstrap_room` on a batch is prompt i's `room + i` (sgl-project/sglang
 * python/sglang/srt/managers/io_struct.py `GenerateReqInput` normalisation of `bootstrap_room`,
 * 2026 index versions), so prefill and decode meet in one room per prompt. Other values pass as sent
 * (request-body.ts refuses what is not an integer).
 */
function fannedOutRoom(room: unknown, i: number): unknown {
  const text = typeof room === 'number' && Number.isInteger(room) ? String(room) : room;
  if (typeof text !== 'string' || !/^\d+$/.test(text)) return room;
  return (BigInt(text) + BigInt(i)).toString();
}

/** SGLang's `meta_info.finish_reason` for the simulator's finish reasons (managers/schedule_batch.py `FINISH_*.to_json`). */
function finishReasonJson(finish: string | null, completionTokens: number): string {
  if (finish === null) return 'null';
  if (finish === 'length') return `{"type":"length","length":${completionTokens}}`;
  if (finish === 'abort') return '{"type":"abort","message":"Abort before prefill"}';
  return '{"type":"stop","matched":null}';
}

/**
 * One `/generate` answer body (a stream event's payload too). `text` and `output_ids` are cumulative,
 * SGLang's default (`incremental_streaming_output` off); `finish_reason` is null until the last event.
 */
export function generateBody(
  id: string,
  text: string,
  outputIds: readonly number[],
  finishReason: unknown,
  promptTokens: number,
  completionTokens: number,
  cachedTokens: number,
): Record<string, unknown> {
  return {
    text,
    output_ids: outputIds,
    meta_info: {
      id,
      finish_reason: finishReason,
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      cached_tokens: cachedTokens,
    },
  };
}

/**
 * The `/generate` stream in ResponseWriter's chunk interface. Text and ids grow as escaped strings,
 * so a token costs one frame string (no JSON.stringify per token).
 */
export class GenerateChunkWriter {
  private text = '';
  private ids = '';
  private n = 0;
  /** Everything between `output_ids` and the finish reason; fixed per request. */
  private readonly tail: string;

  constructor(
    id: string,
    private readonly promptTokens: number,
    private readonly cachedTokens: number,
  ) {
    this.tail = `,"meta_info":{"id":${JSON.stringify(id)},"finish_reason":`;
  }

  first(): string {
    return '';
  }

  /** `/generate` has one choice of plain words (no tools or structured output reach it). */
  step(c: ChoiceOutput, i: number, end: Ending | null): string {
    return this.token(c.words[i]!, end);
  }

  private token(word: number, end: Ending | null): string {
    this.text += OUTPUT_VOCAB.json[word]!.slice(1, -1);
    this.ids += (this.n === 0 ? '' : ',') + OUTPUT_VOCAB.ids[word]!;
    this.n++;
    return this.frame(end?.finish ?? null);
  }

  finishOnly(end: Ending): string {
    return this.frame(end.finish);
  }

  usage(_u: Usage): string {
    return '';
  }

  private frame(finish: string | null): string {
    return (
      `data: {"text":"${this.text}","output_ids":[${this.ids}]${this.tail}${finishReasonJson(finish, this.n)}` +
      `,"prompt_tokens":${this.promptTokens},"completion_tokens":${this.n},"cached_tokens":${this.cachedTokens}}}\n\n`
    );
  }
}

/** The non-stream `/generate` answer for one prompt. */
export function generateFinalBody(
  id: string,
  text: string,
  outputIds: readonly number[],
  finish: string,
  usage: Usage,
): Record<string, unknown> {
  return generateBody(
    id,
    text,
    outputIds,
    JSON.parse(finishReasonJson(finish, usage.completion_tokens)) as unknown,
    usage.prompt_tokens,
    usage.completion_tokens,
    usage.prompt_tokens_details.cached_tokens,
  );
}

/**
 * `POST /generate`: one prompt goes to `single`; a batch is split and each prompt POSTed back to this
 * server's own `/generate` (same auth headers), answered as the list of results in order, or with the
 * first failure as it came (SGLang gathers the batch: one failure fails it). Streaming batches are
 * not simulated (400).
 */
export async function handleGenerate(
  req: IncomingMessage,
  res: ServerResponse,
  text: string,
  single: () => Promise<void>,
  self: { url: () => string; peers: PeerClient; timeoutMs: number },
): Promise<void> {
  const parsed = parseJsonPreservingRoom(text);
  if (!parsed.ok) throw new HttpError(400, parsed.message);
  if (!isPlainObject(parsed.value) || !isBatchedGenerate(parsed.value)) return await single();
  const body = parsed.value;
  if (body.stream === true)
    throw new RequestError(400, 'streaming batched /generate is not supported by the simulator', 'stream');
  const headers: Record<string, string> = {};
  for (const h of ['authorization', 'x-api-key'] as const) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  const gone = new AbortController();
  res.once('close', () => gone.abort('client_disconnect'));
  const results = await Promise.all(
    splitGenerateBatch(body).map((one) =>
      self.peers.postJson(`${self.url()}/generate`, one, self.timeoutMs, gone.signal, headers),
    ),
  );
  if (res.destroyed) return;
  const failed = results.find((r) => r.status !== 200);
  if (failed) return sendJson(res, failed.status, failed.body);
  sendJson(
    res,
    200,
    results.map((r) => r.body),
  );
}
