import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CorsSection } from '../../config/cors-section.js';

/** Answers a request's CORS part; returns true when it answered the request (a preflight) itself. */
export type CorsHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * The gateway's CORS policy (Fetch standard, "CORS protocol"), or undefined when no origin is allowed,
 * so a server without CORS pays nothing per request. A request from an allowed origin gets
 * `Access-Control-Allow-Origin` (and `Vary: Origin` unless the policy is `*`, so caches keep answers per
 * origin); a preflight (`OPTIONS` with `Access-Control-Request-Method`) from one is answered 204 here,
 * before authentication: browsers send preflights without credentials. A disallowed origin gets no
 * CORS headers, and the browser withholds the answer from the page.
 */
export function corsHandler(config: CorsSection): CorsHandler | undefined {
  if (config.allowedOrigins.length === 0) return undefined;
  const anyOrigin = config.allowedOrigins.includes('*');
  const origins = new Set(config.allowedOrigins);
  const methods = config.allowedMethods.join(', ');
  const headers = config.allowedHeaders.join(', ');
  const maxAge = String(config.maxAgeSeconds);
  return (req, res) => {
    const origin = req.headers.origin;
    if (origin === undefined) return false;
    if (!anyOrigin) res.setHeader('vary', 'Origin');
    if (!anyOrigin && !origins.has(origin)) return false;
    res.setHeader('access-control-allow-origin', anyOrigin ? '*' : origin);
    if (req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return false;
    res.writeHead(204, {
      'access-control-allow-methods': methods,
      'access-control-allow-headers': headers,
      'access-control-max-age': maxAge,
      'content-length': '0',
    });
    res.end();
    return true;
  };
}
