import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * Who owns state a request stores (stored responses): the tenant header when `server.tenantIsolation`
 * names one, else the API key. Only a hash is kept (stored records never hold a key); anonymous callers
 * (no keys configured) share one tenant.
 */
export function storeTenant(req: IncomingMessage, apiKey: string, isolation: string): string {
  let identity = `k:${apiKey}`;
  if (isolation.startsWith('header:')) {
    const value = req.headers[isolation.slice('header:'.length).toLowerCase()];
    identity = `h:${typeof value === 'string' ? value : Array.isArray(value) ? value.join(',') : ''}`;
  }
  return createHash('sha256').update('motor-store\0').update(identity).digest('base64url').slice(0, 32);
}
