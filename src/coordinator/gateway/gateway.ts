import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { bearerToken, sendJson } from '../../common/http.js';
import type { Logger } from '../../common/logger.js';
import type { CoordinatorConfig } from '../../config/coordinator-config.js';
import type { DispatchObserver } from '../../observability/dispatch-observer.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { PendingTriggers } from '../dispatch/pending-trigger.js';
import type { InstanceSource } from '../instance-source.js';
import { MotorError } from '../motor-error.js';
import type { SchedulingAdapter } from '../scheduling-adapter.js';
import { ApiKeys, BEARER_CHALLENGE, unauthorizedError } from './api-keys.js';
import { completionsRoute, refuser } from './completions-route.js';
import { metaserverRoute } from './metaserver-route.js';
import { readinessReport } from './readiness.js';
import { renderError } from './render-error.js';
import type { ApiKind } from './request-validation.js';

export interface GatewayDeps {
  config: CoordinatorConfig;
  source: InstanceSource;
  dispatcher: Dispatcher;
  triggers: PendingTriggers;
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

/** The OpenAI-compatible HTTP front (node:http): routes, auth, body limits, validation. */
export function createGateway(deps: GatewayDeps): Server {
  const { log } = deps;
  const apiKeys = new ApiKeys(deps.config.server.apiKeys);
  const refuse = refuser(deps);
  const completions = completionsRoute(deps, apiKeys, refuse);
  const metaserver = metaserverRoute(deps);
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
        if (!apiKeys.allows(bearerToken(req))) return renderError(res, unauthorizedError(), BEARER_CHALLENGE);
        return sendJson(res, 200, modelList(deps.source));
      case 'POST /v1/metaserver':
        return metaserver(req, res);
      default:
        return renderError(res, new MotorError('not_found', `no route for ${method} ${path}`));
    }
  }

  return server;
}

function modelList(source: InstanceSource): unknown {
  const names = new Set<string>();
  for (const i of source.all()) for (const m of i.models) names.add(m);
  const created = Math.floor(Date.now() / 1000);
  return {
    object: 'list',
    data: [...names].sort().map((id) => ({ id, object: 'model', created, owned_by: 'motor' })),
  };
}
