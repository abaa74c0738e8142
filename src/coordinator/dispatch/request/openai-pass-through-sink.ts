import { openAiError } from '../../../common/http.js';
import type { MotorError } from '../../../common/motor-error.js';
import { SSE_DONE_FRAME, sseErrorFrame } from '../relay/sse-relay.js';
import { HttpClientSink } from './client-sink.js';

/**
 * The sink of OpenAI chat and completions: the pipeline's frames are already that wire shape, so the
 * engine's bytes pass through untouched. A stream ends with `data: [DONE]`; a failure is the engine's
 * own 4xx verbatim or an OpenAI error object, and after commit one SSE error frame then `[DONE]`.
 */
export class OpenAiPassThroughSink extends HttpClientSink {
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

  endStream(tail: Buffer | null = null): void {
    if (this.res.writableEnded) return;
    this.res.end(tail === null ? SSE_DONE_FRAME : Buffer.concat([tail, Buffer.from(SSE_DONE_FRAME)]));
  }

  streamError(err: MotorError | null): void {
    if (this.res.writableEnded) return;
    if (err) this.res.write(sseErrorFrame(err.message, err.type, err.code));
    this.res.end(SSE_DONE_FRAME);
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

  sendBytes(status: number, body: Buffer, contentType: string): void {
    this.committed = true;
    this.res.writeHead(status, {
      'content-type': contentType,
      'content-length': body.length,
      'x-request-id': this.rootRequestId,
    });
    this.res.end(body);
  }

  protected refuse(err: MotorError): void {
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
