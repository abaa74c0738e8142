import type { IncomingMessage, ServerResponse } from 'node:http';
import { ClientGoneError } from './body-reader.js';
import { DEFAULT_FRAME_ERRORS, type FrameErrors } from './frame-errors.js';
import { HttpError, renderError, type RenderableError } from './http-error.js';
import type { Logger } from './logger.js';
import type { RouteParams, RouteTable } from './route-table.js';

/** A route's handler; it reads the body itself (`BodyReader`) only if it needs one. */
export type RouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  params: RouteParams,
) => void | Promise<void>;

/** Answers a request no route takes (`path` as routed, after `normalizePath`). */
export type NoRouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  path: string,
) => void | Promise<void>;

export interface HttpFrameOptions {
  routes: RouteTable<RouteHandler>;
  /** The server's wording of the frame's own errors; default `DEFAULT_FRAME_ERRORS`. */
  errors?: FrameErrors;
  /** Runs first for every request, e.g. authentication: throw a renderable error to refuse. */
  beforeRoute?: (req: IncomingMessage) => void;
  /** Answers every request no route takes (unknown path or method) instead of the 404 / 405. */
  noRoute?: NoRouteHandler;
  /** Maps the path (the target up to `?`) before routing, e.g. URL normalisation. Default: as sent. */
  normalizePath?: (path: string) => string;
  /** Domain errors that render as they are (e.g. `MotorError`); `HttpError` always does. */
  renderable?: (err: unknown) => RenderableError | undefined;
  /** After an error answer, close the connection if the request body was not read to its end. */
  closeUnreadBody?: boolean;
  /** Logs unexpected errors, which are answered `errors.internal()`. */
  logger?: Logger;
  /** Message of that log line. Default `request failed`. */
  failureLog?: string;
}

/**
 * The HTTP server frame: a `node:http` request listener that routes by method + path through a
 * `RouteTable` (404 / 405 with `Allow`, or `noRoute`), and renders anything a handler throws as
 * `{"error":{"message","type","param","code"}}` — a `HttpError` or a `renderable` domain error as it
 * is, a `ClientGoneError` by destroying the response, anything else logged and answered as
 * `errors.internal()`. Per request it allocates nothing beyond what the handler does (plus one
 * rejection callback when the handler is async).
 */
export function httpFrame(options: HttpFrameOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { routes, beforeRoute, noRoute, normalizePath, renderable, closeUnreadBody, logger } = options;
  const errors = options.errors ?? DEFAULT_FRAME_ERRORS;
  const failureLog = options.failureLog ?? 'request failed';

  const fail = (req: IncomingMessage, res: ServerResponse, err: unknown): void => {
    if (err instanceof ClientGoneError) {
      res.destroy();
      return;
    }
    let known = err instanceof HttpError ? err : renderable?.(err);
    if (known === undefined) {
      logger?.error({ err, method: req.method, url: req.url }, failureLog);
      known = errors.internal();
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    renderError(res, known);
    // A refused body may still be streaming in; close rather than reuse the connection.
    if (closeUnreadBody && !req.complete) res.once('finish', () => req.destroy());
  };

  const route = (req: IncomingMessage, res: ServerResponse): void | Promise<void> => {
    beforeRoute?.(req);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const raw = q < 0 ? url : url.slice(0, q);
    const path = normalizePath ? normalizePath(raw) : raw;
    const method = req.method ?? 'GET';
    const found = routes.match(method, path);
    if (found.kind === 'found') return found.handler(req, res, found.params);
    if (noRoute) return noRoute(req, res, method, path);
    throw found.kind === 'not_found'
      ? errors.notFound(method, path)
      : errors.methodNotAllowed(method, path, found.allow);
  };

  return (req, res) => {
    let pending: void | Promise<void>;
    try {
      pending = route(req, res);
    } catch (err) {
      fail(req, res, err);
      return;
    }
    if (pending) pending.catch((err: unknown) => fail(req, res, err));
  };
}
