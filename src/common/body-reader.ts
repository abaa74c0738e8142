import type { IncomingMessage } from 'node:http';
import { DEFAULT_FRAME_ERRORS, type FrameErrors } from './frame-errors.js';
import { parseJson } from './http.js';

/** Deepest JSON nesting a body may have by default (OpenAI bodies, tool schemas included, stay far below). */
export const MAX_JSON_DEPTH = 512;

/**
 * True when `value` nests arrays/objects deeper than `limit` (the top level is depth 0). Iterative,
 * so hostile input cannot overflow the stack, and without a per-node allocation.
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const nodes: object[] = [value];
  const depths: number[] = [0];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth >= limit) return true;
    if (Array.isArray(node)) {
      for (const child of node as unknown[]) {
        if (typeof child === 'object' && child !== null) {
          nodes.push(child);
          depths.push(depth + 1);
        }
      }
    } else {
      for (const key in node) {
        const child = (node as Record<string, unknown>)[key];
        if (typeof child === 'object' && child !== null) {
          nodes.push(child);
          depths.push(depth + 1);
        }
      }
    }
  }
  return false;
}

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
}

/**
 * Reads request bodies with a server's limits, throwing the server's `FrameErrors` (413, 400) or
 * `ClientGoneError`, which the frame renders. Handlers call it only when their route needs a body,
 * so a route without one never reads or parses.
 */
export class BodyReader {
  readonly maxBytes: number;
  readonly maxDepth: number;

  constructor(
    limits: BodyLimits,
    private readonly errors: FrameErrors = DEFAULT_FRAME_ERRORS,
  ) {
    this.maxBytes = limits.maxBytes;
    this.maxDepth = limits.maxDepth ?? MAX_JSON_DEPTH;
  }

  /** The whole body as bytes. */
  async raw(req: IncomingMessage): Promise<Buffer> {
    try {
      return await readBody(req, this.maxBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw this.errors.bodyTooLarge(this.maxBytes);
      throw new ClientGoneError(err);
    }
  }

  /** Parses bytes already read; refuses invalid JSON and bodies nested deeper than `maxDepth`. */
  parseJson(raw: Buffer): unknown {
    const parsed = parseJson(raw);
    if (!parsed.ok) throw this.errors.invalidJson(parsed.message);
    if (this.maxDepth !== Infinity && nestedDeeperThan(parsed.value, this.maxDepth)) {
      // JSON.parse accepts any depth, but re-serialising a very deep body overflows the stack.
      throw this.errors.tooDeep(this.maxDepth);
    }
    return parsed.value;
  }

  /** The whole body, parsed as JSON (an empty body is invalid JSON). */
  async json(req: IncomingMessage): Promise<unknown> {
    return this.parseJson(await this.raw(req));
  }
}

class BodyTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`request body exceeds ${limitBytes} bytes`);
  }
}

/** Reads a whole request body, refusing (and draining nothing more) past `limitBytes`. */
function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limitBytes) {
      reject(new BodyTooLargeError(limitBytes));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        req.off('data', onData);
        req.pause();
        reject(new BodyTooLargeError(limitBytes));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.once('error', reject);
    req.once('aborted', () => reject(new Error('client aborted the request body')));
  });
}
