import type { IncomingMessage, ServerResponse } from 'node:http';
import { drained } from './engine-reply.js';
import {
  forwardableRequestHeaders,
  forwardableResponseHeaders,
  type EngineResponse,
} from './http-clients.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';

/** The frame's `noRoute`: every request no route takes passes through, with its body unless GET / HEAD. */
export async function passThroughRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  path: string,
): Promise<void> {
  const body = method === 'GET' || method === 'HEAD' ? undefined : await ctx.bodies.raw(req);
  return passThrough(ctx, req, res, body, path);
}

/**
 * Forwards a request unchanged and streams the answer back byte for byte. `route` labels the
 * metric; `target` is what the engine is asked for (default: the client's own target).
 */
export async function passThrough(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer | undefined,
  route: string,
  target: string = req.url ?? '/',
): Promise<void> {
  // Only origin-form targets are forwarded: `*`, absolute-form (`http://host/...`) and `//host/...`
  // would be an upstream client error (502) or a request aimed elsewhere.
  if (target[0] !== '/' || target[1] === '/') {
    return sendError(
      res,
      new ProxyError('bad_request_target', 'request target must be an absolute path (origin-form)'),
    );
  }
  ctx.metrics.passThrough.inc({ route });
  const ctl = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) ctl.abort('client_disconnect');
  });
  let up: EngineResponse;
  try {
    up = await ctx.engine.request({
      method: (req.method ?? 'GET') as 'GET' | 'POST',
      path: target,
      headers: forwardableRequestHeaders(req.headers),
      body,
      signal: ctl.signal,
    });
  } catch (err) {
    // No attempt, no peer: only the answer of the ladder applies (nothing when the client left).
    if (!res.headersSent && !ctl.signal.aborted)
      sendError(res, ProxyError.engineUnreachable(err, body?.length));
    return;
  }
  res.writeHead(up.statusCode, forwardableResponseHeaders(up.headers, true));
  try {
    for await (const chunk of up.body) {
      if (!res.write(chunk)) await drained(res);
    }
    res.end();
  } catch {
    res.destroy();
  }
}
