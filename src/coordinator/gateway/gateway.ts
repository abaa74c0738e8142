import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  bearerToken,
  BodyTooLargeError,
  parseJson,
  readBody,
  sendError,
  sendJson,
} from '../../common/http.js';
import type { Logger } from '../../common/logger.js';
import type { CoordinatorConfig } from '../../config/coordinator-config.js';
import { parseMetaserverKvFields } from '../../engine-adapters/index.js';
import type { DispatchObserver } from '../../observability/dispatch-observer.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { RequestCancellation } from '../dispatch/request-cancellation.js';
import type { TriggerRegistry } from '../dispatch/trigger-registry.js';
import type { InstanceSource } from '../instance-source.js';
import { MotorError } from '../motor-error.js';
import type { SchedulingAdapter } from '../scheduling-adapter.js';
import { readinessReport } from './readiness.js';
import {
  MAX_JSON_DEPTH,
  nestedDeeperThan,
  validateClientRequest,
  type ApiKind,
} from './request-validation.js';

export interface GatewayDeps {
  config: CoordinatorConfig;
  source: InstanceSource;
  dispatcher: Dispatcher;
  triggers: TriggerRegistry;
  log: Logger;
  /** Observability routes (`/metrics`, `/dashboard`); returns true when it answered. */
  extraRoutes?: (req: IncomingMessage, res: ServerResponse, method: string, path: string) => boolean;
  /** Admission control (concurrency limit, queue, per-key rate limit) before scheduling; `/ready`. */
  scheduling: Pick<SchedulingAdapter, 'admission' | 'explainer'>;
  /** Counts API requests refused before dispatch (the dispatcher reports the others). */
  observer?: Pick<DispatchObserver, 'rejected'>;
}

const API_ROUTES: Record<string, ApiKind> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'completion',
};

function renderError(res: ServerResponse, err: MotorError, extraHeaders: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  sendError(res, err.status, err.message, err.type, err.param, err.code);
}

/** The OpenAI-compatible HTTP front (node:http): routes, auth, body limits, validation. */
export function createGateway(deps: GatewayDeps): Server {
  const { config, log } = deps;
  const apiKeys = new Set(config.server.apiKeys);
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err }, 'unhandled gateway error');
      renderError(res, new MotorError('internal', 'internal error'));
    });
  });
  server.keepAliveTimeout = 65_000;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    const kind = API_ROUTES[path];
    if (kind !== undefined) {
      if (method !== 'POST')
        return refuse(res, path, new MotorError('method_not_allowed', `use POST for ${path}`));
      return completions(req, res, path, kind);
    }
    if (deps.extraRoutes?.(req, res, method, path)) return;
    switch (`${method} ${path}`) {
      case 'GET /health':
        return sendJson(res, 200, { status: 'ok' });
      case 'GET /ready': {
        const report = readinessReport(deps.source.routable(), deps.scheduling.explainer);
        return sendJson(res, report.ready ? 200 : 503, { ready: report.ready, models: report.models });
      }
      case 'GET /v1/models':
        if (!authorized(bearerToken(req))) return unauthorized(res);
        return sendJson(res, 200, modelList());
      case 'POST /v1/metaserver':
        return metaserver(req, res);
      default:
        return renderError(res, new MotorError('not_found', `no route for ${method} ${path}`));
    }
  }

  /** No keys configured, or the request's bearer token is one of them (keys are never ''). */
  const authorized = (token: string): boolean => apiKeys.size === 0 || apiKeys.has(token);

  const unauthorizedError = (): MotorError =>
    new MotorError('unauthorized', 'missing or invalid API key (Authorization: Bearer <key>)');
  const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer' };

  function unauthorized(res: ServerResponse): void {
    renderError(res, unauthorizedError(), BEARER_CHALLENGE);
  }

  /** An API request refused before dispatch: rendered and counted (motor_requests_total, access log). */
  function refuse(
    res: ServerResponse,
    path: string,
    err: MotorError,
    headers?: Record<string, string>,
  ): void {
    deps.observer?.rejected?.(path, err.status, err.code);
    renderError(res, err, headers);
  }

  type JsonBody = { value: unknown } | { error: MotorError; headers?: Record<string, string> } | null;

  /** The parsed body, or the error to answer with; null when the client went away mid-body. */
  async function readJson(req: IncomingMessage, res: ServerResponse): Promise<JsonBody> {
    let buf: Buffer;
    try {
      buf = await readBody(req, config.server.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError)
        return { error: new MotorError('body_too_large', err.message), headers: { connection: 'close' } };
      res.destroy();
      return null;
    }
    const parsed = parseJson(buf);
    if (!parsed.ok) return { error: new MotorError('invalid_request', parsed.message) };
    // JSON.parse accepts any depth, but re-serialising a very deep body overflows the stack (500).
    if (nestedDeeperThan(parsed.value, MAX_JSON_DEPTH)) {
      return {
        error: new MotorError(
          'invalid_request',
          `request body is nested deeper than ${MAX_JSON_DEPTH} levels`,
        ),
      };
    }
    return { value: parsed.value };
  }

  async function completions(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    kind: ApiKind,
  ): Promise<void> {
    // the token is also the rate limiter's key (anonymous callers share the key '')
    const apiKey = bearerToken(req);
    if (!authorized(apiKey)) return refuse(res, path, unauthorizedError(), BEARER_CHALLENGE);
    const body = await readJson(req, res);
    if (body === null) return;
    if ('error' in body) return refuse(res, path, body.error, body.headers);
    let client;
    try {
      client = validateClientRequest(kind, body.value);
    } catch (err) {
      if (err instanceof MotorError) return refuse(res, path, err);
      throw err;
    }
    // Admission before scheduling: 429 (rate limit) / 503 (full) with Retry-After. The request's one
    // cancellation covers the wait in the queue too (a signal is made only if it queues).
    const cancellation = new RequestCancellation(res);
    const admitted = deps.scheduling.admission.tryAcquire({ apiKey, signal: () => cancellation.signal() });
    const ticket = admitted instanceof Promise ? await admitted : admitted;
    if (!ticket.admitted) {
      if (ticket.reason === 'aborted') {
        deps.observer?.rejected?.(path, 499, 'client_disconnect');
        return void res.destroy();
      }
      return refuse(
        res,
        path,
        new MotorError(ticket.status === 429 ? 'rate_limited' : 'overloaded', ticket.message),
        { 'retry-after': String(ticket.retryAfterSeconds) },
      );
    }
    try {
      const session = req.headers['x-session-id'];
      await deps.dispatcher.serve(
        client,
        `req-${randomUUID()}`,
        path,
        res,
        { sessionKey: typeof session === 'string' && session !== '' ? session : undefined, apiKey },
        cancellation,
      );
    } finally {
      ticket.release();
    }
  }

  function modelList(): unknown {
    const names = new Set<string>();
    for (const i of deps.source.all()) for (const m of i.models) names.add(m);
    const created = Math.floor(Date.now() / 1000);
    return {
      object: 'list',
      data: [...names].sort().map((id) => ({ id, object: 'model', created, owned_by: 'motor' })),
    };
  }

  /** Direct trigger: the decode engine's connector posts its KV fields; the coordinator runs the prefill. */
  async function metaserver(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req, res);
    if (body === null) return;
    if ('error' in body) return renderError(res, body.error, body.headers);
    const parsed = parseMetaserverKvFields(body.value);
    if (!parsed.ok) {
      const id = (body.value as { request_id?: unknown } | null)?.request_id;
      if (typeof id === 'string') {
        deps.triggers
          .peek(id)
          ?.fail(new MotorError('protocol_error', `invalid metaserver call: ${parsed.message}`));
      }
      return renderError(
        res,
        new MotorError('invalid_request', `invalid metaserver call: ${parsed.message}`, {
          param: parsed.param,
        }),
      );
    }
    const entry = await deps.triggers.take(parsed.value.request_id, config.timeouts.metaserverWaitMs);
    if (entry === null) {
      return renderError(
        res,
        new MotorError('not_found', `no pending trigger prefill for request ${parsed.value.request_id}`),
      );
    }
    const reply = await entry.run(parsed.value);
    sendJson(res, reply.status, reply.body);
  }

  return server;
}
