import type { ServerResponse } from 'node:http';
import { sendJson } from '../common/http.js';
import type { SimEngine } from './options.js';
import type { GenRequest } from './request-body.js';
import { ChunkWriter } from './chunk-writer.js';
import { endWithEvents, makeUsage, SSE_DONE } from './sse.js';
import { generateBody } from './sglang-generate.js';

/** Why the request failed, in the engine's words (the decode side of a failed KV transfer). */
export function generationErrorMessage(engine: SimEngine, id: string, g: GenRequest): string {
  if (engine !== 'sglang') {
    // The text is illustrative (fixture vllm/openai/stream-error-frame.json); vLLM raises GenerationError.
    return `KV cache load failed for request ${id} (simulated fault: stream_error_first)`;
  }
  // SGLang decode: disaggregation/decode.py `DecodeTransferQueue.pop_transferred` logs and aborts with
  // this text; `KVTransferError.__str__` is `KVTransferError(bootstrap_room=N): reason` (mooncake/conn.py).
  const room = g.bootstrap?.room ?? 'None';
  return (
    `Decode transfer failed for request rank=0 decode_req.req.rid='${id}' decode_req.req.bootstrap_room=${room} ` +
    `with exception KVTransferError(bootstrap_room=${room}): simulated fault: stream_error_first`
  );
}

/**
 * Answers a request whose generation failed before its first token, as the engine does:
 *
 * vLLM (vllm/entrypoints/openai/engine/serving.py `create_streaming_error_response`; GenerationError →
 * `server_utils.py` `generation_error_handler`): stream = 200, `data: {"error":{message,type:
 * "InternalServerError",param,code:500}}`, `data: [DONE]`; non-stream = 500 with that error object.
 *
 * SGLang (scheduler `prepare_abort(..., status_code=500)` → tokenizer_manager.py `_wait_one_response`):
 * - OpenAI stream: serving_chat.py `_generate_chat_stream` (index 002897c23b; completions assumed alike,
 *   not read) turns an abort carrying an HTTPStatus into
 *   `data: {"error":{object:"error",message,type:"INTERNAL_SERVER_ERROR",param:null,code:500}}` (the
 *   first event when nothing was generated), then the usage chunk when asked, then `data: [DONE]`.
 * - `/generate` stream: http_server.py `stream_results` relays the output as it is: a native event
 *   whose `meta_info.finish_reason` is `{type:"abort",message,status_code:500}`, then `data: [DONE]`.
 * - non-stream (both): tokenizer_manager raises `HTTPException(500, message)`, which http_server.py's
 *   HTTPException handler renders FLAT: `{"object":"error","message","type":"500","param":null,"code":500}`.
 * Fixtures: vllm/openai/stream-error-frame.json, sglang/server/stream-error-frame.*.json.
 */
export function writeGenerationError(
  engine: SimEngine,
  g: GenRequest,
  id: string,
  model: string,
  res: ServerResponse,
): void {
  const message = generationErrorMessage(engine, id, g);
  const sglang = engine === 'sglang';
  if (!g.stream) {
    const body = sglang
      ? { object: 'error', message, type: '500', param: null, code: 500 }
      : { error: { message, type: 'InternalServerError', param: null, code: 500 } };
    return sendJson(res, 500, body);
  }
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-request-id': id,
  });
  if (g.kind === 'generate') {
    const abort = { type: 'abort', message, status_code: 500 };
    const event = `data: ${JSON.stringify(generateBody(id, '', [], abort, g.promptIds.length, 0, 0))}\n\n`;
    return endWithEvents(res, event, SSE_DONE);
  }
  const error = sglang
    ? { object: 'error', message, type: 'INTERNAL_SERVER_ERROR', param: null, code: 500 }
    : { message, type: 'InternalServerError', param: null, code: 500 };
  const events = [`data: ${JSON.stringify({ error })}\n\n`];
  if (sglang && g.includeUsage) {
    const w = new ChunkWriter(g.kind, id, Math.floor(Date.now() / 1000), model, false);
    events.push(w.usage(makeUsage(g.promptIds.length, 0, 0)));
  }
  endWithEvents(res, ...events, SSE_DONE);
}
