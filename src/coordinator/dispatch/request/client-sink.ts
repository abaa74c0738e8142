import type { ServerResponse } from 'node:http';
import { openAiError } from '../../../common/http.js';
import type { MotorError } from '../../../common/motor-error.js';
import { SSE_DONE_FRAME, sseErrorFrame } from '../relay/sse-relay.js';

/**
 * The client side of one request. Knows whether the response is committed (status line sent) and
 * renders every ending: JSON body, engine 4xx passed through, stream end, or — after commit — one
 * SSE error frame then `data: [DONE]` (never a silently truncated 200). The client going away is
 * the request's cancellation (request-cancellation.ts).
 */
export class ClientSink {
  committed = false;

  constructor(
    readonly res: ServerResponse,
    private readonly rootRequestId: string,
    private readonly stream: boolean,
  ) {}

  commitStream(): void {
    this.committed = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-request-id': this.rootRequestId,
    });
  }

  write(chunk: Buffer | string): boolean {
    return this.res.write(chunk);
  }

  /** Ends the stream with `data: [DONE]`, after `tail` (the last frames) in the same write. */
  endStream(tail: Buffer | null = null): void {
    if (this.res.writableEnded) return;
    this.res.end(tail === null ? SSE_DONE_FRAME : Buffer.concat([tail, Buffer.from(SSE_DONE_FRAME)]));
  }

  /** After commit: an error frame (unless null: the engine's own frame was already relayed), then [DONE]. */
  streamError(err: MotorError | null): void {
    if (this.res.writableEnded) return;
    if (err) this.res.write(sseErrorFrame(err.message, err.type, err.code));
    this.res.end(SSE_DONE_FRAME);
  }

  /** A stalled client (`client_stalled`): nothing more can reach it, so its socket is closed. */
  cut(): void {
    this.res.destroy();
  }

  sendJson(status: number, body: unknown): void {
    this.committed = true;
    const payload = JSON.stringify(body);
    this.res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
      'x-request-id': this.rootRequestId,
    });
    this.res.end(payload);
  }

  /** A complete body relayed as bytes. */
  sendBytes(status: number, body: Buffer, contentType: string): void {
    this.committed = true;
    this.res.writeHead(status, {
      'content-type': contentType,
      'content-length': body.length,
      'x-request-id': this.rootRequestId,
    });
    this.res.end(body);
  }

  /** Renders a failure: an engine 4xx verbatim, else an OpenAI-style error (or the SSE error ending). */
  fail(err: MotorError): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (this.committed) {
      if (this.stream) this.streamError(err);
      else this.res.end();
      return;
    }
    this.committed = true;
    if (err.reply) {
      this.res.writeHead(err.reply.status, {
        'content-type': err.reply.contentType,
        'content-length': err.reply.body.length,
        'x-request-id': this.rootRequestId,
      });
      this.res.end(err.reply.body);
      return;
    }
    const payload = JSON.stringify(openAiError(err.message, err.type, err.param, err.code));
    this.res.writeHead(err.status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
      'x-request-id': this.rootRequestId,
    });
    this.res.end(payload);
  }
}
