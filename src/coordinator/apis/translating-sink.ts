import type { ServerResponse } from 'node:http';
import { isPlainObject } from '../../common/http.js';
import { MotorError } from '../../common/motor-error.js';
import { HttpClientSink } from '../dispatch/pipeline.js';
import { ChatFrameReader, type ChatChunk } from './chat-frames.js';

/** What one client API makes of the pipeline's chat answer (the sink below does the HTTP side). */
export interface ApiRendering {
  /** Events written when the stream is committed. */
  start(): string;
  /** The events one chat chunk becomes. */
  chunk(c: ChatChunk): string;
  /** The closing events; a promise when something must happen first (the response store). */
  end(): string | Promise<string>;
  /** The error event ending a committed stream. */
  streamError(err: MotorError): string;
  /** A non-stream chat completion → the API's JSON body (a promise: the response store). */
  json(chat: ChatChunk): unknown;
  /** An error before commit, in the API's own shape. */
  renderError(res: ServerResponse, err: MotorError): void;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

/**
 * The sink of an API that is not OpenAI chat: the pipeline writes chat frames and JSON as for chat, this
 * renders them in the API's shape as they pass (frame by frame; a non-stream body is parsed once).
 */
export class TranslatingSink extends HttpClientSink {
  private readonly reader = new ChatFrameReader();
  /** An engine error frame seen in the stream (the pipeline then calls `streamError(null)`). */
  private engineError: MotorError | null = null;

  constructor(
    res: ServerResponse,
    rootRequestId: string,
    stream: boolean,
    private readonly api: ApiRendering,
  ) {
    super(res, rootRequestId, stream);
  }

  commitStream(): void {
    this.committed = true;
    this.res.writeHead(200, { ...SSE_HEADERS, 'x-request-id': this.rootRequestId });
    this.res.write(this.api.start());
  }

  write(chunk: Buffer | string): boolean {
    const out = this.translate(chunk);
    return out === '' ? true : this.res.write(out);
  }

  endStream(tail: Buffer | null = null): void {
    if (this.res.writableEnded) return;
    const last = tail === null ? '' : this.translate(tail);
    const end = this.api.end();
    if (typeof end === 'string') {
      this.res.end(last + end);
      return;
    }
    if (last !== '') this.res.write(last);
    end.then(
      (frames) => {
        if (!this.res.writableEnded) this.res.end(frames);
      },
      (err: unknown) => this.streamError(asMotorError(err)),
    );
  }

  streamError(err: MotorError | null): void {
    if (this.res.writableEnded) return;
    const e =
      err ?? this.engineError ?? new MotorError('engine_error', 'the engine ended the stream with an error');
    this.res.end(this.api.streamError(e));
  }

  sendJson(status: number, body: unknown): void {
    this.sendChat(status, isPlainObject(body) ? (body as ChatChunk) : {});
  }

  sendBytes(status: number, body: Buffer): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return this.fail(new MotorError('protocol_error', 'the engine answered invalid JSON'));
    }
    this.sendJson(status, parsed);
  }

  protected refuse(err: MotorError): void {
    this.res.setHeader('x-request-id', this.rootRequestId);
    this.api.renderError(this.res, err.reply ? engineReplyError(err) : err);
  }

  private sendChat(status: number, chat: ChatChunk): void {
    this.committed = true;
    const send = (body: unknown): void => {
      const payload = JSON.stringify(body);
      this.res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        'x-request-id': this.rootRequestId,
      });
      this.res.end(payload);
    };
    let body: unknown;
    try {
      body = this.api.json(chat);
    } catch (err) {
      this.committed = false;
      return this.fail(asMotorError(err));
    }
    if (body instanceof Promise)
      body.then(send, (err: unknown) => {
        this.committed = false;
        this.fail(asMotorError(err));
      });
    else send(body);
  }

  private translate(bytes: Buffer | string): string {
    let out = '';
    this.reader.push(bytes, (c) => {
      if (c.error !== undefined) {
        const message = typeof c.error.message === 'string' ? c.error.message : 'engine error';
        this.engineError = new MotorError('engine_error', message);
        return;
      }
      out += this.api.chunk(c);
    });
    return out;
  }
}

/** An engine's own 4xx body (OpenAI shape) → the same status and message, for the API's renderer. */
export function engineReplyError(err: MotorError): MotorError {
  const reply = err.reply!;
  let message = `the engine refused the request (${reply.status})`;
  try {
    const body: unknown = JSON.parse(reply.body.toString('utf8'));
    if (isPlainObject(body)) {
      const e = isPlainObject(body.error) ? body.error : body;
      if (typeof e.message === 'string') message = e.message;
      else if (typeof e.detail === 'string') message = e.detail;
    }
  } catch {
    // not JSON: the status says enough
  }
  return new MotorError('engine_rejected', message, { status: reply.status });
}

export function asMotorError(err: unknown): MotorError {
  return err instanceof MotorError
    ? err
    : new MotorError('internal', err instanceof Error ? err.message : String(err));
}
