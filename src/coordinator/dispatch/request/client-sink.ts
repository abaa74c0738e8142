import type { ServerResponse } from 'node:http';
import type { MotorError } from '../../../common/motor-error.js';

/**
 * The client side of one request, as the pipeline writes to it: OpenAI chat / completion SSE frames and
 * JSON bodies (the engines' own shapes). Knows whether the response is committed (status line sent) and
 * renders every ending: JSON body, engine 4xx passed through, stream end, or — after commit — an error
 * ending (never a silently truncated 200). Each client API has one implementation (src/coordinator/apis/
 * makes it); the client going away is the request's cancellation (request-cancellation.ts).
 */
export interface ClientSink {
  /** The status line is sent: a failure from now on ends the response instead of replacing it. */
  readonly committed: boolean;
  /** Sends the status line and headers of a stream answer. */
  commitStream(): void;
  /** Writes stream frames; false when the client's socket buffer is full (wait for `onDrain`). */
  write(chunk: Buffer | string): boolean;
  /** Calls `listener` once when the client has taken what `write` buffered. */
  onDrain(listener: () => void): void;
  /** Ends the stream after `tail` (the last frames) in the same write. */
  endStream(tail?: Buffer | null): void;
  /** After commit: an error frame (unless null: the engine's own frame was already relayed), then the end. */
  streamError(err: MotorError | null): void;
  /** A stalled client (`client_stalled`): nothing more can reach it, so its socket is closed. */
  cut(): void;
  /** A complete JSON answer. */
  sendJson(status: number, body: unknown): void;
  /** A complete body relayed as bytes. */
  sendBytes(status: number, body: Buffer, contentType: string): void;
  /** Renders a failure: before commit an error answer, after commit the error ending. */
  fail(err: MotorError): void;
}

/**
 * What every sink shares on the HTTP side: the committed flag, backpressure, the cut, and how a failure
 * ends a response whose status line is already out — a stream with its error ending, a JSON body by
 * closing it (its length was promised, so the client sees it short rather than a second answer).
 * Before commit each API renders the refusal in its own shape (`refuse`).
 */
export abstract class HttpClientSink implements ClientSink {
  committed = false;

  constructor(
    protected readonly res: ServerResponse,
    protected readonly rootRequestId: string,
    protected readonly stream: boolean,
  ) {}

  abstract commitStream(): void;
  abstract write(chunk: Buffer | string): boolean;
  abstract endStream(tail?: Buffer | null): void;
  abstract streamError(err: MotorError | null): void;
  abstract sendJson(status: number, body: unknown): void;
  abstract sendBytes(status: number, body: Buffer, contentType: string): void;
  /** The failure as this API's error answer; the response is not committed yet. */
  protected abstract refuse(err: MotorError): void;

  onDrain(listener: () => void): void {
    this.res.once('drain', listener);
  }

  cut(): void {
    this.res.destroy();
  }

  fail(err: MotorError): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (this.committed) {
      if (this.stream) this.streamError(err);
      else this.res.end();
      return;
    }
    this.committed = true;
    this.refuse(err);
  }
}
