import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { z } from 'zod';
import { BodyReader } from '../common/body-reader.js';
import { frameErrors, type FrameErrors } from '../common/frame-errors.js';
import { closeServer, isPlainObject, listen, sendJson } from '../common/http.js';
import { HttpError } from '../common/http-error.js';
import { httpFrame, type RouteHandler } from '../common/http-frame.js';
import { RouteTable } from '../common/route-table.js';
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
  /** From the `effective` provider: what this replica routes with (config + discovery); null without one. */
  effective: unknown;
}

export interface ManagementApiOptions {
  registry: Registry;
  /** Usually the `HealthProber`. */
  health?: { health(id: string): InstanceHealth | undefined; isRoutable(id: string): boolean };
  load?: (id: string) => unknown;
  circuit?: (id: string) => unknown;
  effective?: (id: string) => unknown;
  /** Overrides `routable` (e.g. an instance discovery holds out); default: the health provider's. */
  routable?: (id: string) => boolean;
  /** Why a registered URL is refused (instance-url-policy.ts), or null; absent = every valid URL is accepted. */
  checkUrl?: (url: string) => string | null;
  /** When set, every request needs `Authorization: Bearer <adminToken>` (401 without, 403 if wrong). */
  adminToken?: string;
  logger?: Logger;
  /** Default 1 MiB. */
  bodyLimitBytes?: number;
  /** Routes the embedding coordinator adds (e.g. `GET /v1/doctor`), behind the same admin token. */
  extraRoutes?: ReadonlyArray<{ method: 'GET' | 'POST'; path: string; handler: RouteHandler }>;
}

/** A `node:http` request listener. */
export type ManagementHandler = (req: IncomingMessage, res: ServerResponse) => void;

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

/** The management API's wording where it differs from the frame's defaults. */
const MANAGEMENT_ERRORS: FrameErrors = frameErrors({
  notFound: (method, path) =>
    new HttpError(404, `unknown route ${method} ${path}`, { code: 'unknown_route' }),
  // The connection is closed after an error answer instead (`closeUnreadBody`).
  bodyTooLarge: (limitBytes) =>
    new HttpError(413, `request body exceeds ${limitBytes} bytes`, { code: 'body_too_large' }),
  invalidJson: (message) => new HttpError(400, message, { code: 'invalid_json' }),
  tooDeep: (maxDepth) =>
    new HttpError(400, `request body is nested deeper than ${maxDepth} levels`, { code: 'invalid_body' }),
  internal: () => new HttpError(500, 'internal error', { code: 'internal_error' }),
});

const notAnObject = (): HttpError =>
  new HttpError(400, 'request body must be a JSON object', { code: 'invalid_body' });

function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

/** Routes on the URL-normalised path: `/a/../v1/instances` is `/v1/instances`. */
function urlPathname(path: string): string {
  return new URL(path, 'http://management.invalid').pathname;
}

/**
 * The management API as one request listener, meant for its own port (never the public gateway's).
 * Errors are OpenAI-style `{"error":{message,type,param,code}}`; validation errors name the field.
 */
export function createManagementHandler(options: ManagementApiOptions): ManagementHandler {
  const api = new ManagementRoutes(options);
  const routes = new RouteTable<RouteHandler>({ ignoreTrailingSlash: true })
    .add('GET', '/v1/instances', api.list)
    .add('POST', '/v1/instances', api.register)
    .add('GET', '/v1/instances/:id', api.show)
    .add('DELETE', '/v1/instances/:id', api.remove)
    .add('POST', '/v1/instances/:id/drain', api.drain)
    .add('POST', '/v1/instances/:id/pause', api.pause)
    .add('POST', '/v1/instances/:id/resume', api.resume)
    .add('POST', '/v1/instances/:id/heartbeat', api.heartbeat)
    .add('POST', '/instances/refresh', api.refresh);
  for (const r of options.extraRoutes ?? []) routes.add(r.method, r.path, r.handler);
  const expectedDigest = options.adminToken ? tokenDigest(options.adminToken) : undefined;
  return httpFrame({
    routes,
    errors: MANAGEMENT_ERRORS,
    beforeRoute: expectedDigest ? (req) => authenticate(req, expectedDigest) : undefined,
    normalizePath: urlPathname,
    renderable: (err) => (err instanceof RegistryError ? err : undefined),
    closeUnreadBody: true,
    logger: options.logger,
    failureLog: 'management request failed',
  });
}

/** Refuses a request without `Authorization: Bearer <admin token>` (401) or with a wrong one (403). */
function authenticate(req: IncomingMessage, expectedDigest: Buffer): void {
  const header = req.headers.authorization;
  const m = header ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
  if (!m) {
    throw new HttpError(401, 'missing admin token: send Authorization: Bearer <token>', {
      code: 'unauthorized',
      headers: { 'www-authenticate': 'Bearer' },
    });
  }
  if (!timingSafeEqual(tokenDigest(m[1]!), expectedDigest)) {
    throw new HttpError(403, 'invalid admin token', { code: 'forbidden' });
  }
}

/** One handler per route; `:id` routes receive the decoded id. */
class ManagementRoutes {
  private readonly registry: Registry;
  private readonly logger: Logger | undefined;
  private readonly bodies: BodyReader;

  constructor(private readonly options: ManagementApiOptions) {
    this.registry = options.registry;
    this.logger = options.logger;
    this.bodies = new BodyReader({ maxBytes: options.bodyLimitBytes ?? 1024 * 1024 }, MANAGEMENT_ERRORS);
  }

  readonly list: RouteHandler = (_req, res) => {
    const data = this.registry
      .list()
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((record) => this.view(record));
    sendJson(res, 200, { object: 'list', data });
  };

  readonly register: RouteHandler = async (req, res) => {
    const body = parseWith(registerBodySchema, await this.readJsonObject(req, false));
    const { lease_ttl_ms: leaseTtlMs, ...registration } = body;
    this.checkUrl(registration.url, 'url');
    const existed = this.registry.get(registration.id) !== undefined;
    const registerOptions: RegisterOptions = leaseTtlMs
      ? { source: 'self', lease: { ttlMs: leaseTtlMs, renew: 'heartbeat' } }
      : { source: 'api' };
    const record = await this.registry.register(registration, registerOptions);
    this.logger?.info({ id: record.id, role: record.role, url: record.url, existed }, 'instance registered');
    sendJson(res, existed ? 200 : 201, this.view(record));
  };

  readonly show: RouteHandler = (_req, res, { id }) => {
    sendJson(res, 200, this.view(this.requireInstance(id!)));
  };

  readonly remove: RouteHandler = async (_req, res, { id }) => {
    this.requireInstance(id!);
    await this.registry.remove(id!);
    this.logger?.info({ id }, 'instance removed');
    sendJson(res, 200, { id, object: 'instance.deleted', deleted: true });
  };

  readonly drain: RouteHandler = async (req, res, { id }) => {
    const body = parseWith(drainBodySchema, await this.readJsonObject(req, true));
    this.requireInstance(id!);
    const record = await this.registry.drain(id!);
    this.logger?.info({ id, inFlight: this.registry.inFlight(id!) }, 'instance draining');
    const drained =
      body.wait_ms !== undefined
        ? await this.registry.awaitDrained(id!, body.wait_ms)
        : this.registry.inFlight(id!) === 0;
    sendJson(res, 200, { ...this.view(this.registry.get(id!) ?? record), drained });
  };

  readonly pause: RouteHandler = (req, res, { id }) => this.pauseOrResume(req, res, id!, 'pause');

  readonly resume: RouteHandler = (req, res, { id }) => this.pauseOrResume(req, res, id!, 'resume');

  readonly heartbeat: RouteHandler = async (req, res, { id }) => {
    parseWith(emptyBodySchema, await this.readJsonObject(req, true));
    if (!(await this.registry.heartbeat(id!))) {
      throw new HttpError(404, `no instance with id ${JSON.stringify(id)} (lease expired?)`, {
        param: 'id',
        code: 'not_found',
      });
    }
    sendJson(res, 200, { id, lease: this.registry.get(id!)?.lease ?? null });
  };

  readonly refresh: RouteHandler = async (req, res) => {
    const body = parseWith(refreshBodySchema, await this.readJsonObject(req, false));
    const event = body.event;
    // Validate every entry before applying any.
    const entries = body.instances.map((entry, i) => refreshEntry(event, entry, `instances[${i}]`));
    entries.forEach((e, i) => e.registration && this.checkUrl(e.registration.url, `instances[${i}].url`));
    const outcome =
      event === 'add' || event === 'set'
        ? await this.applyRegistrations(event, entries)
        : await this.applyToExisting(event, entries);
    const { applied, removed, notFound } = outcome;
    this.logger?.info({ event, applied, removed, notFound }, 'instances refreshed');
    sendJson(res, 200, { event, applied, removed, not_found: notFound });
  };

  private async pauseOrResume(
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
    name: 'pause' | 'resume',
  ): Promise<void> {
    parseWith(emptyBodySchema, await this.readJsonObject(req, true));
    this.requireInstance(id);
    const record = name === 'pause' ? await this.registry.pause(id) : await this.registry.resume(id);
    this.logger?.info({ id, state: record.state }, `instance ${name}d`);
    sendJson(res, 200, this.view(record));
  }

  /** `add` / `set`: register every entry; `set` also removes refresh-sourced instances not listed. */
  private async applyRegistrations(event: 'add' | 'set', entries: RefreshEntry[]): Promise<RefreshOutcome> {
    const outcome: RefreshOutcome = { applied: [], removed: [], notFound: [] };
    for (const entry of entries) {
      await this.registry.register(entry.registration!, { source: 'refresh' });
      outcome.applied.push(entry.id);
    }
    if (event === 'set') {
      const keep = new Set(entries.map((e) => e.id));
      for (const record of this.registry.list()) {
        if (record.source === 'refresh' && !keep.has(record.id) && (await this.registry.remove(record.id))) {
          outcome.removed.push(record.id);
        }
      }
    }
    return outcome;
  }

  /** `del` / `pause` / `resume` of listed ids; unknown ids are reported, not refused. */
  private async applyToExisting(
    event: 'del' | 'pause' | 'resume',
    entries: RefreshEntry[],
  ): Promise<RefreshOutcome> {
    const outcome: RefreshOutcome = { applied: [], removed: [], notFound: [] };
    for (const { id } of entries) {
      if (!this.registry.get(id)) {
        outcome.notFound.push(id);
        continue;
      }
      if (event === 'del') {
        if (await this.registry.remove(id)) outcome.removed.push(id);
        else outcome.notFound.push(id);
      } else {
        await (event === 'pause' ? this.registry.pause(id) : this.registry.resume(id));
        outcome.applied.push(id);
      }
    }
    return outcome;
  }

  private view(record: InstanceRecord): InstanceView {
    const { health, load, circuit, effective, routable } = this.options;
    return {
      ...record,
      health: health?.health(record.id) ?? null,
      routable: routable
        ? routable(record.id)
        : health
          ? health.isRoutable(record.id)
          : record.state === 'active',
      in_flight: this.registry.inFlight(record.id),
      load: load?.(record.id) ?? null,
      circuit: circuit?.(record.id) ?? null,
      effective: effective?.(record.id) ?? null,
    };
  }

  /** The body as a JSON object; an empty body is `{}` when `allowEmpty`. */
  private async readJsonObject(req: IncomingMessage, allowEmpty: boolean): Promise<Record<string, unknown>> {
    const raw = await this.bodies.raw(req);
    if (raw.length === 0 || raw.toString('utf8').trim() === '') {
      if (allowEmpty) return {};
      throw notAnObject();
    }
    const value = this.bodies.parseJson(raw);
    if (!isPlainObject(value)) throw notAnObject();
    return value;
  }

  /** Refuses (400, naming the field) a URL the instance-URL policy does not allow. */
  private checkUrl(url: string, param: string): void {
    const refusal = this.options.checkUrl?.(url);
    if (refusal) throw new RegistryError('invalid_instance', `${param}: ${refusal}`, param);
  }

  private requireInstance(id: string): InstanceRecord {
    const record = this.registry.get(id);
    if (!record) {
      throw new HttpError(404, `no instance with id ${JSON.stringify(id)}`, {
        param: 'id',
        code: 'not_found',
      });
    }
    return record;
  }
}

function parseWith<T>(schema: z.ZodType<T>, value: unknown, prefix = ''): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw registryErrorFromZod(parsed.error, prefix);
  return parsed.data;
}

interface RefreshOutcome {
  applied: string[];
  removed: string[];
  notFound: string[];
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
  const server = createServer(handler);
  const url = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  if (options.logger) logListening(options.logger, { url }, 'management');
  return { url, server, close: () => closeServer(server) };
}
