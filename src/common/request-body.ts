/**
 * A request body as an HTTP client sends it: serialised, or the buffers that make it in order (a
 * body spliced from another body's bytes, json-splice.ts), sent without joining them when that is
 * cheaper. The coordinator's legs and the engine proxy's engine calls both send such bodies.
 */
export type RequestBody = string | Buffer | readonly Buffer[];

/**
 * Lists of fewer bytes go joined into one Buffer: undici writes a Buffer with its headers in one
 * `writev`, an iterable through an async loop with one socket write per chunk (client-h1.js
 * `writeIterable`). Measured per leg (2-3 chunks): a list costs ~15-25 µs more CPU up to 16 KiB,
 * breaks even near 24 KiB, and saves ~40 µs at 32 KiB, where joining starts to fault in fresh pages.
 */
const LIST_MIN_BYTES = 24 * 1024;

/** A body's length: bytes, or characters for a string (the upload-refusal rule takes either). */
export function bodyLength(body: RequestBody | undefined): number {
  if (body === undefined) return 0;
  if (typeof body === 'string' || Buffer.isBuffer(body)) return body.length;
  let bytes = 0;
  for (const part of body) bytes += part.length;
  return bytes;
}

/**
 * `body` as undici takes it, with `headers`: a string or Buffer as is; a list of buffers joined
 * below `LIST_MIN_BYTES`, else kept as an iterable under an explicit `content-length` (undici
 * writes an iterable chunk by chunk under the length it is given: Dispatcher.md `body`).
 */
export function undiciBody<H extends Record<string, string>>(
  body: RequestBody,
  headers: H,
): { body: string | Buffer | Iterable<Buffer>; headers: H | (H & { 'content-length': string }) } {
  if (typeof body === 'string' || Buffer.isBuffer(body)) return { body, headers };
  const bytes = bodyLength(body);
  if (body.length > 1 && bytes >= LIST_MIN_BYTES)
    return { body, headers: { ...headers, 'content-length': String(bytes) } };
  return { body: body.length === 1 ? body[0]! : Buffer.concat(body, bytes), headers };
}
