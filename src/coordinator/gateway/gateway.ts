import type { IncomingMessage, ServerResponse } from 'node:http';
import { BodyReader } from '../../common/body-reader.js';
import { httpFrame, type NoRouteHandler, type RouteHandler } from '../../common/http-frame.js';
import { bearerToken, sendJson } from '../../common/http.js';
import type { Logger } from '../../common/logger.js';
import { RouteTable } from '../../common/route-table.js';
import type { CoordinatorConfig } from '../../config/coordinator-config.js';
import type { DispatchObserver } from '../../observability/dispatch-observer.js';
import type { Dispatcher, PendingTriggers } from '../dispatch/pipeline.js';
import type { InstanceSource } from '../fleet/instance-source.js';
import { servedModels } from '../scheduling-bridge/route.js';
import { MotorError } from '../../common/motor-error.js';
import type { SchedulingAdapter } from '../scheduling-bridge/scheduling-adapter.js';
import { ApiKeys, BEARER_CHALLENGE, unauthorizedError } from './api-keys.js';
import { apiRoute, refuser } from './api-route.js';
import { tenantSalter } from './tenant-salt.js';
import { minUploadRate, tenantSaltSecret } from '../../config/server-section.js';
import { clientIdentity } from './client-identity.js';
import { GATEWAY_BODY_ERRORS } from './json-body.js';
import { metaserverRoute } from './metaserver-route.js';
import { notReadyReason, readinessReport, ReadinessCauseLog } from './readiness.js';
import { renderError } from '../../common/http-error.js';
import { DOCTOR_PATH } from '../doctor/doctor-route.js';
import { doctorHint } from './doctor-hint.js';
import { COUNT_TOKENS_PATH } from '../apis/anthropic-messages/adapter.js';
import { renderAnthropicError } from '../apis/anthropic-messages/errors.js';
import { countTokensRoute } from './count-tokens-route.js';
import { RESPONSES_PATH, type ResponsesDeps } from '../apis/openai-responses/adapter.js';
import { apiAdapters } from '../apis/api-adapters.js';
import { responsesStoreRoutes } from './responses-routes.js';
import type { PromptTokenCounter } from '../apis/prompt-token-count.js';
import { corsHandler } from './cors.js';
import { ONE_INSTANCE_PATHS } from '../apis/one-instance/one-instance-paths.js';
import { oneInstanceRoute } from './one-instance-route.js';

/** Where direct-trigger decode engines call back for their KV fields: `POST <prefix><token>`. */
export const METASERVER_ROUTE_PREFIX = '/v1/metaserver/';

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
  /** Where `server.tenantSaltSecretEnv` is read (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Prompt token counts (`/v1/messages/count_tokens`); absent = that route says it cannot count. */
  countTokens?: PromptTokenCounter;
  /** The Responses API's store; absent = none (only `store: false` requests are served). */
  responses?: ResponsesDeps;
  /** P/D pairs whose decodes recompute instead of loading the KV, with the cause (`/ready`). */
  kvLoadDegraded?: () => Record<string, string>;
}

/**
 * The OpenAI-compatible HTTP front as a request listener (node:http on the common HTTP frame): routes,
 * auth, body limits, validation. Needs no server of its own (an application may mount it).
 */
export function createGatewayListener(
  deps: GatewayDeps,
): (req: IncomingMessage, res: ServerResponse) => void {
  const apiKeys = new ApiKeys(deps.config.server.apiKeys);
  const { maxBodyBytes, maxJsonKeys } = deps.config.server;
  const bodies = new BodyReader(
    { maxBytes: maxBodyBytes, maxKeys: maxJsonKeys, minUploadRate: minUploadRate(deps.config.server) },
    GATEWAY_BODY_ERRORS,
  );
  const refuse = refuser(deps);
  const salter = tenantSalter({
    isolation: deps.config.server.tenantIsolation,
    secret: tenantSaltSecret(deps.config.server, deps.env ?? process.env).secret,
  });
  /** `GET /v1/models/{id}` (the `openai` SDK's `models.retrieve`): one model's entry, or OpenAI's 404. */
  const retrieveModel = (req: IncomingMessage, res: ServerResponse, id: string): void => {
    if (!apiKeys.allows(bearerToken(req))) return renderError(res, unauthorizedError(), BEARER_CHALLENGE);
    const model = modelEntries(deps.source).find((m) => m.id === id);
    if (model !== undefined) return sendJson(res, 200, model);
    // OpenAI's wording and code for an unknown model (its API reference, "Retrieve model").
    renderError(
      res,
      new MotorError('model_not_found', `The model '${id}' does not exist`, { param: 'model' }),
    );
  };
  const client = clientIdentity(deps.config.server);
  const responsesDeps = deps.responses ?? { store: null, maxChainDepth: 1 };
  const stored = responsesStoreRoutes(
    responsesDeps.store,
    apiKeys,
    deps.config.server.tenantIsolation,
    refuse,
  );
  const readinessLog = new ReadinessCauseLog(deps.log);
  const routes = new RouteTable<RouteHandler>()
    .add('GET', '/health', (_req, res) => sendJson(res, 200, { status: 'ok' }))
    .add('GET', '/ready', (_req, res) => {
      const report = readinessReport(
        deps.source.routable(),
        deps.scheduling.explainer,
        deps.source.problems?.(),
        deps.kvLoadDegraded?.(),
      );
      const reason = notReadyReason(report, deps.source);
      readinessLog.note(reason);
      sendJson(res, report.ready ? 200 : 503, reason === undefined ? report : { ...report, reason });
    })
    .add('GET', '/v1/models', (req, res) => {
      if (!apiKeys.allows(bearerToken(req))) return renderError(res, unauthorizedError(), BEARER_CHALLENGE);
      sendJson(res, 200, modelList(deps.source));
    })
    .add('GET', `${MODELS_PREFIX}:id`, (req, res, params) => retrieveModel(req, res, params.id ?? ''))
    .add('POST', `${METASERVER_ROUTE_PREFIX}:token`, metaserverRoute(deps))
    .add(
      'POST',
      COUNT_TOKENS_PATH,
      countTokensRoute(deps, apiKeys, bodies, refuser(deps, renderAnthropicError)),
    )
    .add('GET', `${RESPONSES_PATH}/:id`, stored.retrieve)
    .add('DELETE', `${RESPONSES_PATH}/:id`, stored.remove)
    .add('GET', `${RESPONSES_PATH}/:id/input_items`, stored.inputItems);
  // every client API's POST route, and the paths whose refusals are counted as API requests
  const apiPaths = new Set([COUNT_TOKENS_PATH, RESPONSES_PATH]);
  for (const adapter of apiAdapters({ responses: responsesDeps })) {
    routes.add('POST', adapter.path, apiRoute(deps, { apiKeys, salter, client }, bodies, adapter));
    apiPaths.add(adapter.path);
  }
  const oneInstance = oneInstanceRoute(deps, { apiKeys, client }, bodies, refuse);
  for (const path of ONE_INSTANCE_PATHS) {
    routes.add('POST', path, (req, res) => oneInstance(req, res, path));
    apiPaths.add(path);
  }

  /**
   * Not in the table: a routed path with the wrong method is 405 with its `Allow` (RFC 9110 §15.5.6
   * requires the header; an API path's refusal is counted), then observability, else 404.
   */
  const noRoute: NoRouteHandler = (req, res, method, path) => {
    const match = routes.match(method, path);
    if (match.kind === 'method_not_allowed') {
      const err = new MotorError('method_not_allowed', `use ${match.allow} for ${path}`);
      const allow = { allow: match.allow };
      return apiPaths.has(path) ? refuse(res, path, err, allow) : renderError(res, err, allow);
    }
    // Hugging Face ids hold a '/': a client that does not percent-encode it sends two segments.
    if (method === 'GET' && path.startsWith(MODELS_PREFIX) && path.length > MODELS_PREFIX.length)
      return retrieveModel(req, res, safeDecode(path.slice(MODELS_PREFIX.length)));
    if (deps.extraRoutes?.(req, res, method, path)) return;
    if (path === DOCTOR_PATH)
      return renderError(res, new MotorError('not_found', doctorHint(deps.config.management)));
    renderError(res, new MotorError('not_found', `no route for ${method} ${path}`));
  };

  const frame = httpFrame({
    routes,
    noRoute,
    renderable: (err) => (err instanceof MotorError ? err : undefined),
    logger: deps.log,
    failureLog: 'unhandled gateway error',
  });
  const cors = corsHandler(deps.config.server.cors);
  if (cors === undefined) return frame;
  return (req, res) => {
    if (!cors(req, res)) frame(req, res);
  };
}

const MODELS_PREFIX = '/v1/models/';

interface ModelEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

/** Configured models win per instance; else what its engine listed at discovery (no per-request fan-out). */
function modelEntries(source: InstanceSource): ModelEntry[] {
  const names = new Set<string>();
  for (const i of source.all()) for (const m of servedModels(i)) names.add(m);
  const created = Math.floor(Date.now() / 1000);
  return [...names].sort().map((id) => ({ id, object: 'model', created, owned_by: 'motor' }));
}

function modelList(source: InstanceSource): unknown {
  return { object: 'list', data: modelEntries(source) };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
