import type { IncomingMessage } from 'node:http';

/** Who a request is from, for per-client shares (the body budget's): never sent anywhere, never logged. */
export type ClientIdentity = (req: IncomingMessage, apiKey: string) => string;

/**
 * The API key when keys are configured (a caller cannot pick another's), else the tenant header of
 * `server.tenantIsolation: header:<name>` when the request carries it (a trusted front sets it),
 * else the remote address. The prefixes keep the three kinds from colliding.
 */
export function clientIdentity(server: {
  apiKeys: readonly string[];
  tenantIsolation: string;
}): ClientIdentity {
  if (server.apiKeys.length > 0) return (_req, apiKey) => `k:${apiKey}`;
  const header = server.tenantIsolation.startsWith('header:')
    ? server.tenantIsolation.slice('header:'.length).toLowerCase()
    : null;
  return (req) => {
    const tenant = header === null ? undefined : req.headers[header];
    if (typeof tenant === 'string' && tenant !== '') return `h:${tenant}`;
    return `a:${req.socket.remoteAddress ?? ''}`;
  };
}
