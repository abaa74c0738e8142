import type { Dispatcher, Pool } from 'undici';
import { SseParser, errorMessageOf, parseUsage } from './sse-parser.js';

/** Why a request failed; the summary counts errors by this kind (plus the HTTP status). */
export type ErrorKind = 'http' | 'sse_error' | 'connection' | 'timeout' | 'truncated' | 'bad_response';

export interface RequestOutcome {
  ok: boolean;
  /** Set when !ok: `http_503`, `sse_error`, `connection`, `timeout`, `truncated`, `bad_response`. */
  error?: string;
  errorDetail?: string;
  status: number;
  /** Time to the first content token (stream) or to the whole response (non-stream), ms. */
  ttftMs: number;
  e2eMs: number;
  contentChunks: number;
  /** usage.completion_tokens when reported, else the number of content chunks. */
  outputTokens: number;
  promptTokens: number;
  cachedTokens: number;
}

export interface SendOptions {
  pool: Pool;
  path: string;
  headers: Record<string, string>;
  body: string;
  stream: boolean;
  /** Receives every inter-token gap (ms) of this request's stream. */
  onGap?: (gapMs: number) => void;
}

const MAX_ERROR_BODY = 2048;
const MAX_JSON_BODY = 16 * 1024 * 1024;

/**
 * Sends one chat completion through undici's `dispatch` with a handler: body bytes go straight to
 * the incremental SSE parser, no stream objects or per-chunk promises. Never rejects.
 */
export function sendChatCompletion(opts: SendOptions): Promise<RequestOutcome> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let status = 0;
    let settled = false;
    const parser = opts.stream ? new SseParser(opts.onGap) : null;
    const bodyChunks: Buffer[] = [];
    let bodyBytes = 0;

    const finish = (o: Omit<RequestOutcome, 'status' | 'e2eMs'> & { e2eMs?: number }): void => {
      if (settled) return;
      settled = true;
      resolve({ status, e2eMs: o.e2eMs ?? performance.now() - t0, ...o });
    };
    const failure = (error: string, errorDetail: string): void => {
      const chunks = parser?.contentChunks ?? 0;
      finish({
        ok: false,
        error,
        errorDetail,
        ttftMs: parser && chunks > 0 ? parser.firstContentMs - t0 : NaN,
        contentChunks: chunks,
        outputTokens: chunks,
        promptTokens: 0,
        cachedTokens: 0,
      });
    };
    const bodyText = (): string => Buffer.concat(bodyChunks, bodyBytes).toString('utf8');

    const handler: Dispatcher.DispatchHandler = {
      // Defining onRequestStart marks this as a new-style (controller) handler for undici 7.
      onRequestStart() {},
      onResponseStart(_controller, statusCode) {
        status = statusCode;
      },
      onResponseData(_controller, chunk) {
        if (status === 200 && parser) {
          parser.push(chunk, performance.now());
        } else if (bodyBytes < (status === 200 ? MAX_JSON_BODY : MAX_ERROR_BODY)) {
          bodyChunks.push(chunk);
          bodyBytes += chunk.length;
        }
      },
      onResponseEnd() {
        const now = performance.now();
        if (status !== 200) {
          const text = bodyText();
          let detail = text.slice(0, 300);
          try {
            detail = errorMessageOf(JSON.parse(text));
          } catch {
            // not JSON: keep the raw text
          }
          failure(`http_${status}`, detail);
          return;
        }
        if (parser) {
          if (parser.errorMessage !== null) return failure('sse_error', parser.errorMessage);
          if (!parser.done)
            return failure('truncated', `stream ended without [DONE] after ${parser.contentChunks} chunks`);
          const u = parser.usage;
          finish({
            ok: true,
            e2eMs: now - t0,
            ttftMs: parser.contentChunks > 0 ? parser.firstContentMs - t0 : now - t0,
            contentChunks: parser.contentChunks,
            outputTokens: u?.completionTokens ?? parser.contentChunks,
            promptTokens: u?.promptTokens ?? 0,
            cachedTokens: u?.cachedTokens ?? 0,
          });
          return;
        }
        let obj: unknown;
        try {
          obj = JSON.parse(bodyText());
        } catch {
          return failure('bad_response', 'response body is not JSON');
        }
        if (typeof obj === 'object' && obj !== null && 'error' in obj)
          return failure('sse_error', errorMessageOf(obj));
        const choices = (obj as { choices?: unknown }).choices;
        if (!Array.isArray(choices) || choices.length === 0)
          return failure('bad_response', 'response has no choices');
        const u = parseUsage(obj);
        finish({
          ok: true,
          e2eMs: now - t0,
          ttftMs: now - t0,
          contentChunks: 1,
          outputTokens: u?.completionTokens ?? 0,
          promptTokens: u?.promptTokens ?? 0,
          cachedTokens: u?.cachedTokens ?? 0,
        });
      },
      onResponseError(_controller, err) {
        const code = (err as { code?: string }).code ?? '';
        const detail = code ? `${code}: ${err.message}` : err.message;
        if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
          return failure('timeout', detail);
        // The connection broke after a 200 and some of the stream: the client sees a truncated stream.
        if (status === 200) return failure('truncated', detail);
        failure('connection', detail);
      },
    };
    try {
      opts.pool.dispatch(
        { method: 'POST', path: opts.path, headers: opts.headers, body: opts.body },
        handler,
      );
    } catch (err) {
      failure('connection', (err as Error).message);
    }
  });
}
