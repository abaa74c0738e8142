import { z } from 'zod';
import { instanceKvEventsSchema, type InstanceKvEvents } from '../config/kv-events-section.js';
import {
  DispatchProfileError,
  dispatchCapabilitiesForProfile,
  enumValues,
  explainEngineProfile,
  DispatchPlan,
  DispatchProfile,
  ENGINE_KINDS,
  type EngineKind,
} from '../protocol/index.js';

export const INSTANCE_ROLES = ['prefill', 'decode', 'union'] as const;
export type InstanceRole = (typeof INSTANCE_ROLES)[number];

/** `active` takes new work; `draining` and `paused` take none (drain is expected to end in removal). */
export const INSTANCE_STATES = ['active', 'draining', 'paused'] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

/** `proxy`: a `motor engine-proxy` speaks the Motor envelope; `direct`: the engine itself. */
export const INSTANCE_MODES = ['proxy', 'direct'] as const;
export type InstanceMode = (typeof INSTANCE_MODES)[number];

/** Where a record came from: config file, management API, `/instances/refresh`, or self-registration. */
export const INSTANCE_SOURCES = ['static', 'api', 'refresh', 'self'] as const;
export type InstanceSource = (typeof INSTANCE_SOURCES)[number];

/**
 * A lease ties a record's life to its registering process.
 * - `owner`: the process holding the Registry object keeps it alive (etcd lease keepalive); when that
 *   process dies the record expires everywhere. In the memory store it lives as long as the registry.
 * - `heartbeat`: kept alive by `Registry.heartbeat(id)` calls (the management API's heartbeat route,
 *   driven by `registerWithCoordinator`); any coordinator replica may renew it.
 */
export interface InstanceLease {
  ttl_ms: number;
  renew: 'owner' | 'heartbeat';
}

/** One engine instance as the registry stores it and the management API shows it. */
export interface InstanceRecord {
  id: string;
  role: InstanceRole;
  /** Base URL, normalised: no trailing slash, no query. */
  url: string;
  engine: EngineKind;
  mode: InstanceMode;
  /** Plans this instance can take part in (protocol plan names). May be empty (fail closed). */
  dispatch_capabilities: DispatchPlan[];
  /** Profile the capabilities were derived from; `null` when they were given explicitly. */
  dispatch_profile: DispatchProfile | null;
  models: string[];
  labels: Record<string, string>;
  state: InstanceState;
  source: InstanceSource;
  registered_at_ms: number;
  updated_at_ms: number;
  lease: InstanceLease | null;
  /** Where the engine publishes its KV cache events (the config's instance `kvEvents`); null: it does not. */
  kv_events: InstanceKvEvents | null;
}

export type RegistryErrorCode = 'not_found' | 'invalid_instance' | 'conflict' | 'unavailable';

const STATUS_BY_CODE: Record<RegistryErrorCode, number> = {
  not_found: 404,
  invalid_instance: 400,
  conflict: 409,
  unavailable: 503,
};

/** The registry's one error type; `param` names the offending field for validation errors. */
export class RegistryError extends Error {
  constructor(
    readonly code: RegistryErrorCode,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'RegistryError';
  }

  get status(): number {
    return STATUS_BY_CODE[this.code];
  }
}

export function notFound(id: string): RegistryError {
  return new RegistryError('not_found', `no instance with id ${JSON.stringify(id)}`, 'id');
}

/** Lease TTLs are whole seconds in etcd; both stores use the same granularity (min 1 s). */
export function leaseTtlMs(ttlMs: number): number {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new RegistryError(
      'invalid_instance',
      'lease ttl must be a positive number of milliseconds',
      'lease',
    );
  }
  return Math.max(1, Math.ceil(ttlMs / 1000)) * 1000;
}

export const INSTANCE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const PLAN_NAMES = enumValues(DispatchPlan);
const PROFILE_NAMES = enumValues(DispatchProfile);

export const instanceIdSchema = z
  .string()
  .regex(
    INSTANCE_ID_PATTERN,
    'must be 1-128 characters of letters, digits, ".", "_", ":" or "-", starting with a letter or digit',
  );

export const instanceUrlSchema = z.string().transform((value, ctx) => {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `not a valid URL: ${JSON.stringify(value)}` });
    return z.NEVER;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: `must be an http:// or https:// URL` });
    return z.NEVER;
  }
  if (parsed.username || parsed.password || parsed.search || parsed.hash) {
    ctx.addIssue({ code: 'custom', message: 'must not carry credentials, a query or a fragment' });
    return z.NEVER;
  }
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
});

const capabilitiesSchema = z.array(
  z.string().refine((v) => (PLAN_NAMES as string[]).includes(v), {
    message: `unknown dispatch plan; expected one of ${PLAN_NAMES.join(', ')}`,
  }),
);

const labelsSchema = z.record(z.string().min(1).max(128), z.string().max(1024));

/**
 * What a caller supplies to register an instance (library `register()` and `POST /v1/instances`).
 * Capabilities: `dispatch_capabilities` wins; otherwise they are derived from the engine kind,
 * `dispatch_profile` and `engine_config` (the vLLM config with `kv_transfer_config`) through the
 * protocol classifier. A vLLM instance with neither gets no capability (fail closed).
 */
export const instanceRegistrationSchema = z.strictObject({
  id: instanceIdSchema,
  role: z.enum(INSTANCE_ROLES),
  url: instanceUrlSchema,
  engine: z.enum(ENGINE_KINDS).default('vllm'),
  mode: z.enum(INSTANCE_MODES).default('proxy'),
  dispatch_capabilities: capabilitiesSchema.optional(),
  dispatch_profile: z.string().optional(),
  engine_config: z.record(z.string(), z.unknown()).optional(),
  models: z.array(z.string().min(1)).default([]),
  labels: labelsSchema.default({}),
  /** Only honoured when the instance is new, or to set the state explicitly on re-registration. */
  state: z.enum(INSTANCE_STATES).optional(),
  /** The config's instance `kvEvents` (one schema): coordinators subscribe to this engine's KV events. */
  kv_events: instanceKvEventsSchema.optional(),
});

export type InstanceRegistration = z.input<typeof instanceRegistrationSchema>;
export type ParsedRegistration = z.output<typeof instanceRegistrationSchema>;

/** Fields `Registry.update()` may change. */
export const instancePatchSchema = z.strictObject({
  role: z.enum(INSTANCE_ROLES).optional(),
  url: instanceUrlSchema.optional(),
  mode: z.enum(INSTANCE_MODES).optional(),
  dispatch_capabilities: capabilitiesSchema.optional(),
  models: z.array(z.string().min(1)).optional(),
  labels: labelsSchema.optional(),
  state: z.enum(INSTANCE_STATES).optional(),
});

export type InstancePatch = z.input<typeof instancePatchSchema>;

/** Schema of a stored record; used to reject corrupt data read back from a shared store. */
export const instanceRecordSchema = z.strictObject({
  id: instanceIdSchema,
  role: z.enum(INSTANCE_ROLES),
  url: z.string().min(1),
  engine: z.enum(ENGINE_KINDS),
  mode: z.enum(INSTANCE_MODES),
  dispatch_capabilities: z.array(z.enum(PLAN_NAMES as [DispatchPlan, ...DispatchPlan[]])),
  dispatch_profile: z.enum(PROFILE_NAMES as [DispatchProfile, ...DispatchProfile[]]).nullable(),
  models: z.array(z.string()),
  labels: z.record(z.string(), z.string()),
  state: z.enum(INSTANCE_STATES),
  source: z.enum(INSTANCE_SOURCES),
  registered_at_ms: z.number(),
  updated_at_ms: z.number(),
  lease: z
    .strictObject({ ttl_ms: z.number().int().positive(), renew: z.enum(['owner', 'heartbeat']) })
    .nullable(),
  // records stored before the field existed have none
  kv_events: instanceKvEventsSchema.nullable().default(null),
});

/** `a.b[2].c` from a zod issue path. */
export function formatIssuePath(path: ReadonlyArray<PropertyKey>, prefix = ''): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** The first issue of a failed parse as a `RegistryError` whose message and `param` name the field. */
export function registryErrorFromZod(error: z.ZodError, prefix = ''): RegistryError {
  const issue = error.issues[0]!;
  let path = formatIssuePath(issue.path, prefix);
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    path = formatIssuePath([...issue.path, key], prefix);
    message = 'unknown field';
  }
  return new RegistryError('invalid_instance', path ? `${path}: ${message}` : message, path || null);
}

export function parseRegistration(input: unknown, prefix = ''): ParsedRegistration {
  const parsed = instanceRegistrationSchema.safeParse(input);
  if (!parsed.success) throw registryErrorFromZod(parsed.error, prefix);
  return parsed.data;
}

export interface BuildRecordOptions {
  source: InstanceSource;
  lease: InstanceLease | null;
  nowMs: number;
  /**
   * The operator's kept state for this id (`paused`/`draining`), which outlives the record: it is
   * restored when the id registers again after its lease expired (see `operatorHoldOf`).
   */
  hold?: InstanceState | undefined;
}

/**
 * What an operator's state leaves behind once written: `paused`/`draining` are kept apart from the
 * registration until a resume (or an explicit `state` or a `remove()`) clears them; `active` keeps
 * nothing.
 */
export function operatorHoldOf(state: InstanceState): Exclude<InstanceState, 'active'> | undefined {
  return state === 'active' ? undefined : state;
}

/**
 * Builds the stored record for a registration. Re-registering an existing id (an upsert, e.g. a
 * restarted engine proxy) keeps `registered_at_ms` and the operator-set `state` unless the
 * registration sets `state` itself — so a heartbeat re-registration never un-drains an instance.
 * A registration after the record was gone (lease expiry) takes the operator's `hold` instead.
 */
export function buildInstanceRecord(
  registration: ParsedRegistration,
  existing: InstanceRecord | undefined,
  options: BuildRecordOptions,
  prefix = '',
): InstanceRecord {
  let capabilities: DispatchPlan[];
  let profile: DispatchProfile | null;
  if (registration.dispatch_capabilities !== undefined) {
    capabilities = [...new Set(registration.dispatch_capabilities as DispatchPlan[])];
    profile = null;
  } else {
    try {
      profile = explainEngineProfile(
        registration.engine_config ?? {},
        registration.engine,
        registration.dispatch_profile,
      ).profile;
    } catch (err) {
      if (err instanceof DispatchProfileError) {
        const param = `${prefix}${prefix ? '.' : ''}dispatch_profile`;
        throw new RegistryError('invalid_instance', `${param}: ${err.message}`, param);
      }
      throw err;
    }
    capabilities = dispatchCapabilitiesForProfile(profile);
  }
  return {
    id: registration.id,
    role: registration.role,
    url: registration.url,
    engine: registration.engine,
    mode: registration.mode,
    dispatch_capabilities: capabilities,
    dispatch_profile: profile,
    models: [...registration.models],
    labels: { ...registration.labels },
    state: registration.state ?? options.hold ?? existing?.state ?? 'active',
    source: options.source,
    registered_at_ms: existing?.registered_at_ms ?? options.nowMs,
    updated_at_ms: options.nowMs,
    lease: options.lease,
    kv_events: registration.kv_events ?? null,
  };
}

/** Applies a validated patch; the result is re-validated by the caller's store. */
export function applyInstancePatch(
  record: InstanceRecord,
  patch: InstancePatch,
  nowMs: number,
): InstanceRecord {
  const parsed = instancePatchSchema.safeParse(patch);
  if (!parsed.success) throw registryErrorFromZod(parsed.error);
  const p = parsed.data;
  const next: InstanceRecord = { ...record, updated_at_ms: nowMs };
  if (p.role !== undefined) next.role = p.role;
  if (p.url !== undefined) next.url = p.url;
  if (p.mode !== undefined) next.mode = p.mode;
  if (p.dispatch_capabilities !== undefined) {
    next.dispatch_capabilities = [...new Set(p.dispatch_capabilities as DispatchPlan[])];
    next.dispatch_profile = null;
  }
  if (p.models !== undefined) next.models = [...p.models];
  if (p.labels !== undefined) next.labels = { ...p.labels };
  if (p.state !== undefined) next.state = p.state;
  return next;
}

/** Same record content, ignoring `updated_at_ms`. */
export function sameInstanceContent(a: InstanceRecord, b: InstanceRecord): boolean {
  return JSON.stringify({ ...a, updated_at_ms: 0 }) === JSON.stringify({ ...b, updated_at_ms: 0 });
}
