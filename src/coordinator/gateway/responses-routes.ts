import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteParams } from '../../common/route-table.js';
import { bearerToken, sendJson } from '../../common/http.js';
import { MotorError } from '../../common/motor-error.js';
import type { ResponseStore } from '../../state/response-store/response-store.js';
import { BEARER_CHALLENGE, unauthorizedError, type ApiKeys } from './api-keys.js';
import type { Refuse } from './api-route.js';
import { storeTenant } from './store-tenant.js';

type Json = Record<string, unknown>;

/**
 * `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`
 * (`openai` 6.49 resources/responses/responses.d.ts `retrieve`, `delete`; input-items.d.ts `list`).
 * A record of another API key or tenant is a 404 exactly like an unknown id.
 */
export function responsesStoreRoutes(
  store: ResponseStore | null,
  apiKeys: ApiKeys,
  tenantIsolation: string,
  refuse: Refuse,
) {
  const path = '/v1/responses/{id}';
  const notFound = (id: string | undefined): MotorError =>
    new MotorError('not_found', `Response with id '${id ?? ''}' not found.`, { param: 'response_id' });
  const guard = (
    req: IncomingMessage,
    res: ServerResponse,
  ): { tenant: string; store: ResponseStore } | null => {
    const apiKey = bearerToken(req);
    if (!apiKeys.allows(apiKey)) {
      refuse(res, path, unauthorizedError(), BEARER_CHALLENGE);
      return null;
    }
    if (store === null || !store.available()) {
      refuse(res, path, new MotorError('store_unavailable', 'the response store is unavailable'));
      return null;
    }
    return { tenant: storeTenant(req, apiKey, tenantIsolation), store };
  };
  const run = async (res: ServerResponse, work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (err) {
      if (err instanceof MotorError) return refuse(res, path, err);
      throw err;
    }
  };
  return {
    retrieve: (req: IncomingMessage, res: ServerResponse, params: RouteParams) => {
      const g = guard(req, res);
      if (g === null) return;
      return run(res, async () => {
        if (new URL(req.url ?? '/', 'http://x').searchParams.get('stream') === 'true')
          throw new MotorError('invalid_request', 'stream=true retrieval is not supported', {
            param: 'stream',
          });
        const record = await g.store.get(params.id ?? '', g.tenant);
        if (record === null) throw notFound(params.id);
        sendJson(res, 200, record.response);
      });
    },
    remove: (req: IncomingMessage, res: ServerResponse, params: RouteParams) => {
      const g = guard(req, res);
      if (g === null) return;
      return run(res, async () => {
        if (!(await g.store.delete(params.id ?? '', g.tenant))) throw notFound(params.id);
        sendJson(res, 200, { id: params.id, object: 'response', deleted: true });
      });
    },
    inputItems: (req: IncomingMessage, res: ServerResponse, params: RouteParams) => {
      const g = guard(req, res);
      if (g === null) return;
      return run(res, async () => {
        const record = await g.store.get(params.id ?? '', g.tenant);
        if (record === null) throw notFound(params.id);
        sendJson(res, 200, listPage(record.input, new URL(req.url ?? '/', 'http://x').searchParams));
      });
    },
  };
}

/** One page of input items: `order` (default desc, as OpenAI), `after`, `limit` (1–100, default 20). */
export function listPage(items: readonly Json[], q: URLSearchParams): Json {
  const order = q.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc')
    throw new MotorError('invalid_request', "'order' must be 'asc' or 'desc'", { param: 'order' });
  const limit = q.has('limit') ? Number(q.get('limit')) : 20;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new MotorError('invalid_request', "'limit' must be an integer from 1 to 100", { param: 'limit' });
  let list = order === 'desc' ? [...items].reverse() : [...items];
  const after = q.get('after');
  if (after !== null) {
    const at = list.findIndex((i) => i.id === after);
    if (at < 0) throw new MotorError('invalid_request', `no input item '${after}'`, { param: 'after' });
    list = list.slice(at + 1);
  }
  const data = list.slice(0, limit);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: list.length > limit,
  };
}
