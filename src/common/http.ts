import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** OpenAI-style error body: `{"error":{"message","type","param","code"}}`. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | number | null };
}

export function openAiError(
  message: string,
  type = 'invalid_request_error',
  param: string | null = null,
  code: string | number | null = null,
): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

/** The token of an `Authorization: Bearer <token>` header, or '' when there is none. */
export function bearerToken(req: IncomingMessage): string {
  const h = req.headers.authorization;
  return typeof h === 'string' && h.startsWith('Bearer ') ? h.slice(7).trim() : '';
}

export function errorTypeForStatus(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export type JsonParseResult = { ok: true; value: unknown } | { ok: false; message: string };

export function parseJson(body: Buffer): JsonParseResult {
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8')) as unknown };
  } catch (err) {
    return { ok: false, message: `invalid JSON body: ${(err as Error).message}` };
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Listens and resolves with the bound base URL (port 0 picks a free port). */
export function listen(server: Server, port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const addr = server.address() as AddressInfo;
      const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      resolve(`http://${shownHost}:${addr.port}`);
    });
  });
}

/** Closes a server and every open connection so shutdown never waits on idle keep-alive sockets. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
