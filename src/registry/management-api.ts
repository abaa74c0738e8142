import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { z } from 'zod';
import {
  BodyTooLargeError,
  closeServer,
  isPlainObject,
  listen,
  parseJson,
  readBody,
  sendError,
  sendJson,
} from '../common/http.js';
import { logListening, type Logger } from '../common/logger.js';
import type { InstanceHealth } from './health-prober.js';
import {
  instanceIdSchema,
  instanceRegistrationSchema,
  parseRegistration,
  RegistryError,
  registryErrorFromZod,
  type InstanceRecord,
  type InstanceRegistration,
} from './instance-record.js';
import type { RegisterOptions, Registry } from './registry.js';

/** What `GET /v1/instances` shows per instance: the record plus this replica's live view of it. */
export interface InstanceView extends InstanceRecord {
  health: InstanceHealth | null;
  /** Would the scheduler pick it now: active, and healthy when a health provider is given. */
  routable: boolean;
  in_flight: number;
  /** From the `load` provider (e.g. queue depth, KV usage); null without one. */
  load: unknown;
  /** From the `circuit` provider (e.g. `closed|open|half_open`); null without one. */
  circuit: unknown;
}

export interface ManagementApiOptions {
  registry: Registry;
  /** Usually the `HealthProber`. */
  health?: { health(id: string): InstanceHealth | undefined; isRoutable(id: string): boolean };
  load?: (id: string) => unknown;
  circuit?: (id: string) => unknown;
  /** When set, every request needs `Authorization: Bearer <adminToken>` (401 without, 403 if wrong). */
  adminToken?: string;
  logger?: Logger;
  /** Default 1 MiB. */
  bodyLimitBytes?: number;
}

export type ManagementHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

export const MIN_LEASE_TTL_MS = 1000;
export const MAX_LEASE_TTL_MS = 3_600_000;
export const MAX_DRAIN_WAIT_MS = 600_000;

/** `POST /v1/instances`: a registration, plus `lease_ttl_ms` for self-registration with heartbeats. */
const registerBodySchema = instanceRegistrationSchema.extend({
  lease_ttl_ms: z.number().int().min(MIN_LEASE_TTL_MS).max(MAX_LEASE_TTL_MS).optional(),
});

const drainBodySchema = z.strictObject({
  /** Wait up to this long for this replica's in-flight work to finish before answering. */
  wait_ms: z.number().int().min(0).max(MAX_DRAIN_WAIT_MS).optional(),
});

const emptyBodySchema = z.strictObject({});

export const REFRESH_EVENTS = ['add', 'set', 'del', 'pause', 'resume'] as const;
export type RefreshEvent = (typeof REFRESH_EVENTS)[number];

/**
 * `POST /instances/refresh` — the seed system's event message:
 * `{"event": "add|set|del|pause|resume", "instances": [...]}`. See docs/control-plane.md for the semantics.
 * An instance is identified by `id`, or by the seed's integer `instance_id` (stringified).
 */
const refreshBodySchema = z.strictObject({
  event: z.enum(REFRESH_EVENTS),
  instances: z.array(z.unknown()),
});

const seedIdSchema = z.union([instanceIdSchema, z.number().int().min(0)]);

interface Route {
  kind: 'collection' | 'instance' | 'action' | 'refresh';
  id?: string;
  action?: string;
}

const ACTIONS = new Set(['drain', 'pause', 'resume', 'heartbeat']);

function route(pathname: string): Route | undefined {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  if (path === '/v1/instances') return { kind: 'collection' };
  if (path === '/instances/refresh') return { kind: 'refresh' };
  const m = /^\/v1\/instances\/([^/]+)(?:\/([^/]+))?$/.exec(path);
  if (!m) return undefined;
  let id: string;
  try {
    id = decodeURIComponent(m[1]!);
  } catch {
    return undefined;
  }
  if (m[2] === undefined) return { kind: 'instance', id };
  return ACTIONS.has(m[2]) ? { kind: 'action', id, action: m[2] } : undefined;
}

const ALLOWED: Record<Route['kind'], string> = {
  collection: 'GET, POST',
  instance: 'GET, DELETE',
  action: 'POST',
  refresh: 'POST',
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

/**
 * The management API as one request handler, meant for its own port (never the public gateway's).
 * Errors are OpenAI-style `{"error":{message,type,param,code}}`; validation errors name the field.
 */
export function createManagementHandler(options: ManagementApiOptions): ManagementHandler {
  const { registry, logger } = options;
  const bodyLimit = options.bodyLimitBytes ?? 1024 * 1024;
  const expectedDigest = options.adminToken ? tokenDigest(options.adminToken) : undefined;

  const view = (record: InstanceRecord): InstanceView => {
    const health = options.health?.health(record.id) ?? null;
    return {
      ...record,
      health,
      routable: options.health ? options.health.isRoutable(record.id) : record.state === 'active',
      in_flight: registry.inFlight(record.id),
      load: options.load?.(record.id) ?? null,
      circuit: options.circuit?.(record.id) ?? null,
    };
  };

  const readJsonObject = async (
    req: IncomingMessage,
    allowEmpty: boolean,
  ): Promise<Record<string, unknown>> => {
    let raw: Buffer;
    try {
      raw = await readBody(req, bodyLimit);
    } catch (err) {
      if (err instanceof BodyTooLargeError) throw new HttpError(413, err.message, null, 'body_too_large');
      throw err;
    }
    if (raw.length === 0 || raw.toString('utf8').trim() === '') {
      if (allowEmpty) return {};
      throw new HttpError(400, 'request body must be a JSON object', null, 'invalid_body');
    }
    const parsed = parseJson(raw);
    if (!parsed.ok) throw new HttpError(400, parsed.message, null, 'invalid_json');
    if (!isPlainObject(parsed.value)) {
      throw new HttpError(400, 'request body must be a JSON object', null, 'invalid_body');
    }
    return parsed.value;
  };

  const parseWith = <T>(schema: z.ZodType<T>, value: unknown, prefix = ''): T => {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw registryErrorFromZod(parsed.error, prefix);
    return parsed.data;
  };

  const requireInstance = (id: string): InstanceRecord => {
    const record = registry.get(id);
    if (!record) throw new HttpError(404, `no instance with id ${JSON.stringify(id)}`, 'id', 'not_found');
    return record;
  };

  const register = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = parseWith(registerBodySchema, await readJsonObject(req, false));
    const { lease_ttl_ms: leaseTtlMs, ...registration } = body;
    const existed = registry.get(registration.id) !== undefined;
    const registerOptions: RegisterOptions = leaseTtlMs
      ? { source: 'self', lease: { ttlMs: leaseTtlMs, renew: 'heartbeat' } }
      : { source: 'api' };
    const record = await registry.register(registration, registerOptions);
    logger?.info({ id: record.id, role: record.role, url: record.url, existed }, 'instance registered');
    sendJson(res, existed ? 200 : 201, view(record));
  };

  const action = async (
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    name: string,
  ): Promise<void> => {
    if (name === 'drain') {
      const body = parseWith(drainBodySchema, await readJsonObject(req, true));
      requireInstance(id);
      const record = await registry.drain(id);
      logger?.info({ id, inFlight: registry.inFlight(id) }, 'instance draining');
      const drained =
        body.wait_ms !== undefined
          ? await registry.awaitDrained(id, body.wait_ms)
          : registry.inFlight(id) === 0;
      sendJson(res, 200, { ...view(registry.get(id) ?? record), drained });
      return;
    }
    parseWith(emptyBodySchema, await readJsonObject(req, true));
    if (name === 'heartbeat') {
      if (!(await registry.heartbeat(id))) {
        throw new HttpError(
          404,
          `no instance with id ${JSON.stringify(id)} (lease expired?)`,
          'id',
          'not_found',
        );
      }
      sendJson(res, 200, { id, lease: registry.get(id)?.lease ?? null });
      return;
    }
    requireInstance(id);
    const record = name === 'pause' ? await registry.pause(id) : await registry.resume(id);
    logger?.info({ id, state: record.state }, `instance ${name}d`);
    sendJson(res, 200, view(record));
  };

  const refresh = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = parseWith(refreshBodySchema, await readJsonObject(req, false));
    const event = body.event;
    // Validate every entry before applying any.
    const entries = body.instances.map((entry, i) => refreshEntry(event, entry, `instances[${i}]`));
    const applied: string[] = [];
    const removed: string[] = [];
    const notFound: string[] = [];
    if (event === 'add' || event === 'set') {
      for (const entry of entries) {
        await registry.register(entry.registration!, { source: 'refresh' });
        applied.push(entry.id);
      }
      if (event === 'set') {
        const keep = new Set(entries.map((e) => e.id));
        for (const record of registry.list()) {
          if (record.source === 'refresh' && !keep.has(record.id) && (await registry.remove(record.id))) {
            removed.push(record.id);
          }
        }
      }
    } else {
      for (const { id } of entries) {
        if (!registry.get(id)) {
          notFound.push(id);
          continue;
        }
        if (event === 'del') {
          if (await registry.remove(id)) removed.push(id);
          else notFound.push(id);
        } else {
          await (event === 'pause' ? registry.pause(id) : registry.resume(id));
          applied.push(id);
        }
      }
    }
    logger?.info({ event, applied, removed, notFound }, 'instances refreshed');
    sendJson(res, 200, { event, applied, removed, not_found: notFound });
  };

  const dispatch = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (expectedDigest) {
      const header = req.headers.authorization;
      const m = header ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
      if (!m) {
        res.setHeader('www-authenticate', 'Bearer');
        throw new HttpError(
          401,
          'missing admin token: send Authorization: Bearer <token>',
          null,
          'unauthorized',
        );
      }
      if (!timingSafeEqual(tokenDigest(m[1]!), expectedDigest)) {
        throw new HttpError(403, 'invalid admin token', null, 'forbidden');
      }
    }
    const url = new URL(req.url ?? '/', 'http://management.invalid');
    const r = route(url.pathname);
    if (!r) throw new HttpError(404, `unknown route ${req.method} ${url.pathname}`, null, 'unknown_route');
    const method = req.method ?? 'GET';
    const allowed = ALLOWED[r.kind].split(', ');
    if (!allowed.includes(method)) {
      res.setHeader('allow', ALLOWED[r.kind]);
      throw new HttpError(405, `method ${method} not allowed on ${url.pathname}`, null, 'method_not_allowed');
    }
    if (r.kind === 'collection' && method === 'GET') {
      const data = registry
        .list()
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .map(view);
      sendJson(res, 200, { object: 'list', data });
    } else if (r.kind === 'collection') {
      await register(req, res);
    } else if (r.kind === 'instance' && method === 'GET') {
      sendJson(res, 200, view(requireInstance(r.id!)));
    } else if (r.kind === 'instance') {
      requireInstance(r.id!);
      await registry.remove(r.id!);
      logger?.info({ id: r.id }, 'instance removed');
      sendJson(res, 200, { id: r.id, object: 'instance.deleted', deleted: true });
    } else if (r.kind === 'action') {
      await action(req, res, r.id!, r.action!);
    } else {
      await refresh(req, res);
    }
  };

  return async (req, res) => {
    try {
      await dispatch(req, res);
    } catch (err) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HttpError) {
        sendError(res, err.status, err.message, undefined, err.param, err.code);
      } else if (err instanceof RegistryError) {
        sendError(res, err.status, err.message, undefined, err.param, err.code);
      } else {
        logger?.error({ err, method: req.method, url: req.url }, 'management request failed');
        sendError(res, 500, 'internal error', undefined, null, 'internal_error');
      }
      // A refused body may still be streaming in; close rather than reuse the connection.
      if (!req.complete) res.once('finish', () => req.destroy());
    }
  };
}

interface RefreshEntry {
  id: string;
  registration?: InstanceRegistration;
}

function refreshEntry(event: RefreshEvent, entry: unknown, path: string): RefreshEntry {
  if (event === 'add' || event === 'set') {
    if (!isPlainObject(entry)) {
      throw new RegistryError('invalid_instance', `${path}: expected an instance object`, path);
    }
    const registration = normalizeSeedId(entry, path);
    const parsed = parseRegistration(registration, path);
    return { id: parsed.id, registration: parsed };
  }
  // del / pause / resume: a bare id, or an object carrying one (other fields are ignored).
  const raw = isPlainObject(entry) ? normalizeSeedId(entry, path).id : entry;
  const param = isPlainObject(entry) ? `${path}.id` : path;
  const parsed = seedIdSchema.safeParse(raw);
  if (!parsed.success) {
    throw new RegistryError(
      'invalid_instance',
      `${param}: expected an instance id (string, or the seed's non-negative integer instance_id)`,
      param,
    );
  }
  return { id: String(parsed.data) };
}

/** Accepts the seed's `instance_id` (integer) as the instance `id`. */
function normalizeSeedId(entry: Record<string, unknown>, path: string): Record<string, unknown> {
  const { instance_id: seedId, ...rest } = entry;
  if (seedId === undefined) {
    return typeof rest.id === 'number' && Number.isInteger(rest.id) && rest.id >= 0
      ? { ...rest, id: String(rest.id) }
      : rest;
  }
  if (rest.id !== undefined) {
    throw new RegistryError(
      'invalid_instance',
      `${path}.instance_id: give id or instance_id, not both`,
      `${path}.instance_id`,
    );
  }
  const valid =
    (typeof seedId === 'number' && Number.isInteger(seedId) && seedId >= 0) ||
    (typeof seedId === 'string' && seedId.length > 0);
  if (!valid) {
    throw new RegistryError(
      'invalid_instance',
      `${path}.instance_id: expected a non-negative integer`,
      `${path}.instance_id`,
    );
  }
  return { ...rest, id: String(seedId) };
}

export interface ManagementServerOptions extends Omit<ManagementApiOptions, 'registry'> {
  registry: Registry;
  /** Default 0 (a free port). */
  port?: number;
  /** Default 127.0.0.1: the management API is not for the public network. */
  host?: string;
}

export interface ManagementServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Serves the management API on its own port (tests, and the coordinator's `management.port`). */
export async function startManagementServer(options: ManagementServerOptions): Promise<ManagementServer> {
  const handler = createManagementHandler(options);
  const server = createServer((req, res) => void handler(req, res));
  const url = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  if (options.logger) logListening(options.logger, { url, name: 'management' });
  return { url, server, close: () => closeServer(server) };
}
