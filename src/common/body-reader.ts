import type { IncomingMessage } from 'node:http';
import { DEFAULT_FRAME_ERRORS, type FrameErrors } from './frame-errors.js';
import type { ThrowableHttpError } from './http-error.js';
import { parseJson } from './http.js';
import { checkJsonShape } from './json-shape.js';

/** Deepest JSON nesting a body may have by default (OpenAI bodies, tool schemas included, stay far below). */
export const MAX_JSON_DEPTH = 512;

/** The client went away while sending its body: nothing to answer; the frame destroys the response. */
export class ClientGoneError extends Error {
  constructor(cause: unknown) {
    super('client went away while sending the request body', { cause });
    this.name = 'ClientGoneError';
  }
}

export interface BodyLimits {
  maxBytes: number;
  /** Deepest JSON nesting accepted by `parseJson` / `json`; default `MAX_JSON_DEPTH`, `Infinity` to skip. */
  maxDepth?: number;
  /** Most object keys accepted by `parseJson` / `json` (checked before parsing); default `Infinity`. */
  maxKeys?: number;
  /** The slowest upload accepted (default none): an upload slower than this is cut with the 408 of `uploadTooSlow`. */
  minUploadRate?: UploadRate;
}

/**
 * A minimum upload rate: fewer than `bytesPerSecond × windowMs / 1000` bytes arriving in any
 * window of `windowMs` (counted from the first window the body has not arrived in whole) cuts the
 * upload, so a socket that trickles a body cannot hold what admission counted for it for long.
 */
export interface UploadRate {
  bytesPerSecond: number;
  windowMs: number;
}

/**
 * Counts the bytes of a body as they arrive; `false` refuses the rest (admission's body budget,
 * scheduling/admission.ts).
 */
export interface BodyAllowance {
  grow(bytes: number): boolean;
}

/**
 * Reads request bodies with a server's limits, throwing the server's `FrameErrors` (413, 400) or
 * `ClientGoneError`, which the frame renders. Handlers call it only when their route needs a body,
 * so a route without one never reads or parses.
 */
export class BodyReader {
  readonly maxBytes: number;
  readonly maxDepth: number;
  readonly maxKeys: number;

  constructor(
    limits: BodyLimits,
    private readonly errors: FrameErrors = DEFAULT_FRAME_ERRORS,
  ) {
    this.maxBytes = limits.maxBytes;
    this.maxDepth = limits.maxDepth ?? MAX_JSON_DEPTH;
    this.maxKeys = limits.maxKeys ?? Infinity;
    this.minUploadRate = limits.minUploadRate;
  }

  readonly minUploadRate: UploadRate | undefined;

  /** The 413 for a declared length over `maxBytes` (checked before admission counts it), else null. */
  declaredTooLarge(req: IncomingMessage): ThrowableHttpError | null {
    const declared = declaredBodyBytes(req);
    return declared !== null && declared > this.maxBytes ? this.errors.bodyTooLarge(this.maxBytes) : null;
  }

  /** The whole body as bytes, counted chunk by chunk against `allowance`. */
  async raw(req: IncomingMessage, allowance?: BodyAllowance): Promise<Buffer> {
    try {
      return await readBody(req, this.maxBytes, allowance, this.minUploadRate);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw this.errors.bodyTooLarge(this.maxBytes);
      if (err instanceof OverAllowanceError) throw this.errors.overBodyBudget();
      if (err instanceof TooSlowError) throw this.errors.uploadTooSlow(err.rate);
      throw new ClientGoneError(err);
    }
  }

  /**
   * Parses bytes already read; refuses invalid JSON, and, before parsing (one byte scan), bodies
   * nested deeper than `maxDepth` (re-serialising one overflows the stack) or with more than
   * `maxKeys` keys (parsing and walking them blocks the event loop for seconds). `members` receives
   * the top-level members' offsets found by that scan (json-shape.ts); asking for them runs the scan
   * even without a bound.
   */
  parseJson(raw: Buffer, members?: number[]): unknown {
    if (members !== undefined || this.maxDepth !== Infinity || this.maxKeys !== Infinity) {
      const shape = checkJsonShape(raw, this, members);
      if (shape === 'too_deep') throw this.errors.tooDeep(this.maxDepth);
      if (shape === 'too_many_keys') throw this.errors.tooManyKeys(this.maxKeys);
    }
    const parsed = parseJson(raw);
    if (!parsed.ok) throw this.errors.invalidJson(parsed.message);
    return parsed.value;
  }

  /** The whole body, parsed as JSON (an empty body is invalid JSON). */
  async json(req: IncomingMessage, allowance?: BodyAllowance): Promise<unknown> {
    return this.parseJson(await this.raw(req, allowance));
  }
}

class BodyTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`request body exceeds ${limitBytes} bytes`);
  }
}

class OverAllowanceError extends Error {}

class TooSlowError extends Error {
  constructor(readonly rate: UploadRate) {
    super('request body arrives too slowly');
  }
}

/** The length a request declares (`content-length`), or null (chunked, or none). */
export function declaredBodyBytes(req: IncomingMessage): number | null {
  const declared = Number(req.headers['content-length']);
  return req.headers['content-length'] !== undefined && Number.isFinite(declared) ? declared : null;
}

/**
 * Reads a whole request body, refusing (and draining nothing more) past `limitBytes`, when
 * `allowance` refuses a chunk, or when it arrives slower than `minRate`. The rate's timer is armed
 * only for a body that is not complete by its first chunk (most are).
 */
function readBody(
  req: IncomingMessage,
  limitBytes: number,
  allowance?: BodyAllowance,
  minRate?: UploadRate,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = declaredBodyBytes(req);
    if (declared !== null && declared > limitBytes) {
      reject(new BodyTooLargeError(limitBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let windowStart = 0; // `size` when the current rate window began (0 for the first)
    let timer: NodeJS.Timeout | undefined;
    const stop = (): void => {
      req.off('data', onData);
      if (timer !== undefined) clearInterval(timer);
    };
    const refuse = (refusal: Error): void => {
      stop();
      req.pause();
      reject(refusal);
    };
    const onWindow = (): void => {
      if (size - windowStart < (minRate!.bytesPerSecond * minRate!.windowMs) / 1000)
        refuse(new TooSlowError(minRate!));
      windowStart = size;
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      const refusal =
        size > limitBytes
          ? new BodyTooLargeError(limitBytes)
          : allowance !== undefined && !allowance.grow(chunk.length)
            ? new OverAllowanceError()
            : null;
      if (refusal !== null) return refuse(refusal);
      chunks.push(chunk);
      // the first window counts what arrived before it was armed
      if (timer === undefined && minRate !== undefined && size !== declared) {
        timer = setInterval(onWindow, minRate.windowMs);
      }
    };
    req.on('data', onData);
    req.once('end', () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.once('error', (err) => (stop(), reject(err)));
    req.once('aborted', () => (stop(), reject(new Error('client aborted the request body'))));
  });
}
