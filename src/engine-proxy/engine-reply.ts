import type { ServerResponse } from 'node:http';

/** Writes a whole answer (an engine's reply relayed, or a body built here); no-op once answered. */
export function sendRaw(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'application/json',
    ...headers,
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The engine's `content-type`, as a header object to spread (empty when it sent none). */
export function contentTypeOf(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const ct = headers['content-type'];
  return typeof ct === 'string' ? { 'content-type': ct } : {};
}

/** Resolves when the client's socket drained (or closed): backpressure while streaming. */
export function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}
