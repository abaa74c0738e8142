import type { PeerSecretSource } from '../common/peer-secrets.js';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { placeholderSecretProblems } from '../common/placeholder-secret.js';
import { readStructuredMapping } from '../common/structured-file.js';
import type { DispatchPlan, DispatchProfile, EngineKind } from '../protocol/index.js';
import { parseSections } from './config-sections.js';
import { directReachabilityIssues } from './direct-reachability.js';
import * as engineKeys from './engine-credentials.js';
import { engineProxySection, peerSecretSource } from './engine-proxy-section.js';
import { instanceKvEventsSchema, kvEventsSection } from './kv-events-section.js';
import { mergeDeep } from './merge-deep.js';
import { managementSectionSchema } from './management-section.js';
import { serverSectionSchema, tenantSaltSecret } from './server-section.js';
import { resolveSchedulingSection, type CoordinatorSchedulingConfig } from './scheduling-section.js';
import type { PluginCatalog } from '../scheduling/plugin-registry.js';
import { timeoutsSection } from './timeouts-section.js';
import { kvHashSection } from './kv-hash-section.js';
import { resolveInstance } from './resolve-instance.js';
import { migrationSection } from './migration-section.js';
import { responsesSection } from './responses-section.js';
import { routingSyncSection } from './routing-sync-section.js';
import { decodeFirstSection, decodeFirstWarnings } from './decode-first-section.js';

/**
 * The coordinator's configuration: this one schema is the source of truth for types, defaults and
 * docs/configuration.md (`npm run docs:gen`). Sources, later wins: defaults < YAML file < environment < flags.
 */

const ms = (def: number, what: string) => z.int().min(0).default(def).describe(`${what} (ms)`);

export const instanceConfigSchema = z
  .strictObject({
    id: z
      .string()
      .min(1)
      .optional()
      .describe('unique, stable instance name (logs, retry exclusion); default `<role>-<index>`'),
    url: z
      .url({ protocol: /^https?$/ })
      .describe('base URL of the engine proxy (mode proxy) or engine (mode direct)'),
    role: z.enum(['prefill', 'decode', 'union']).describe('what the instance does'),
    mode: z
      .enum(['proxy', 'direct'])
      .default('proxy')
      .describe(
        '`proxy`: Motor envelope to a `motor engine-proxy`; `direct`: engine-native fields (vLLM ' +
          '`kv_transfer_params`, SGLang `bootstrap_*`) to a stock engine',
      ),
    engine: z
      .enum(['vllm', 'sglang'])
      .optional()
      .describe('engine kind behind the URL; unset: the proxy says (mode proxy), `vllm` (mode direct)'),
    dispatchProfile: z
      .string()
      .optional()
      .describe(
        'explicit profile: trigger | handoff | bootstrap (or a plan name); wins over kvTransferConfig and ' +
          "over what a proxy reports (unset in mode proxy: the proxy's `/v1/motor/info`)",
      ),
    kvTransferConfig: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        "the engine's vLLM `kv_transfer_config`, classified as `motor classify` does (no profile = no " +
          'capability, fail closed); pairs form only within one `kv_connector` (MultiConnector: its first)',
      ),
    dispatchCapabilities: z
      .array(z.string())
      .optional()
      .describe(
        'explicit plan list (`prefill_handoff_decode`, `concurrent_engine_sync`), overriding the profile; ' +
          'other strings are ignored',
      ),
    models: z
      .array(z.string().min(1))
      .default([])
      .describe(
        "model names served (routing and `/v1/models`); empty = any model, and `/v1/models` lists the engine's own",
      ),
    bootstrapPort: z
      .int()
      .min(1)
      .max(65535)
      .optional()
      .describe(
        "direct SGLang prefill: bootstrap port given to both legs when the engine's `/server_info` reports " +
          "none (default SGLang's own 8998; SGLang's Rust server: its HTTP port, see `bootstrapOnHttpPort`)",
      ),
    bootstrapOnHttpPort: z
      .boolean()
      .optional()
      .describe(
        'direct SGLang prefill run with `SGLANG_RUST_SERVER=1`: the bootstrap registry is on the `url` port ' +
          '(also taken when its `/server_info` says `frontend: "rust"`)',
      ),
    kvEvents: instanceKvEventsSchema.optional(),
    ...engineKeys.engineCredentialFields,
  })
  .describe('one engine instance');

export const coordinatorConfigSchema = z.strictObject({
  server: serverSectionSchema,
  instances: z
    .array(instanceConfigSchema)
    .default([])
    .describe('the static fleet, registered in the registry at start-up (source `static`, no lease)'),
  scheduler: z
    .strictObject({
      policy: z
        .enum(['round-robin', 'least-in-flight'])
        .optional()
        .describe(
          'deprecated: `round-robin` → `scheduling.policy: round-robin`, `least-in-flight` → `least-load`; ' +
            '`scheduling.policy` wins',
        ),
    })
    .prefault({})
    .describe('deprecated: use `scheduling`'),
  scheduling: z
    .unknown()
    .optional()
    .describe(
      'pair selection (filters → scorers → picker per role), circuit breaker, admission, engine metrics',
    ),
  dispatch: z
    .strictObject({
      fallbackToSingle: z
        .boolean()
        .default(false)
        .describe(
          'when no P/D pair shares a plan: serve on a union instance, else degraded on a prefill (or decode) ' +
            'instance (the default of `scheduling.fallback.*`)',
        ),
      prefillFailurePolicy: z
        .enum(['error', 'retry', 'fallback-decode-only'])
        .default('retry')
        .describe(
          'retryable prefill-leg failure: `error` (answer it), `retry` (new attempt), `fallback-decode-only` ' +
            '(the next attempt runs single on the decode)',
        ),
      planPreference: z
        .array(z.enum(['prefill_handoff_decode', 'concurrent_engine_sync']))
        .default(['prefill_handoff_decode', 'concurrent_engine_sync'])
        .describe(
          'which shared plan wins when a pair shares several (the default of `scheduling.planPreference`)',
        ),
      oneInstanceRoles: z
        .array(z.enum(['union', 'decode', 'prefill']))
        .min(1)
        .default(['union', 'decode'])
        .describe(
          'roles that serve requests with no generation (embeddings, tokenize, detokenize, rerank, score, ' +
            'pooling), tried in order: the first role with an available instance serving the model wins',
        ),
    })
    .prefault({})
    .describe('how a request runs over the instances it is given'),
  retry: z
    .strictObject({
      maxAttempts: z.int().min(1).max(10).default(3).describe('attempts per request, first included'),
      baseDelayMs: ms(25, 'first backoff delay; doubles per attempt'),
      maxDelayMs: ms(1000, 'backoff cap'),
      jitter: z.number().min(0).max(1).default(0.5).describe('fraction of each delay that is randomised'),
    })
    .prefault({})
    .describe('new attempts, only before the first byte reached the client'),
  migration: migrationSection,
  responses: responsesSection,
  routingSync: routingSyncSection,
  decodeFirst: decodeFirstSection,
  timeouts: timeoutsSection,
  kvHash: kvHashSection,
  engineProxy: engineProxySection,
  kvEvents: kvEventsSection,
  registry: z
    .strictObject({
      store: z
        .enum(['memory', 'etcd'])
        .default('memory')
        .describe('memory: this process only; etcd: shared by every coordinator replica'),
      endpoints: z
        .array(z.url({ protocol: /^https?$/ }))
        .default([])
        .describe('etcd client URLs, required with `store: etcd` (e.g. `http://10.0.0.5:2379`)'),
      prefix: z
        .string()
        .min(1)
        .default('/motor/')
        .describe('etcd key prefix, one per deployment (replicas of one deployment share it)'),
      auth: z
        .strictObject({
          username: z.string().min(1).describe('etcd user'),
          password: z.string().describe('its password'),
        })
        .optional()
        .describe('etcd user and password'),
      dialTimeoutMs: ms(5_000, 'etcd connect timeout at start-up'),
    })
    .prefault({})
    .describe('where the live instance set is kept (static instances are loaded into it)'),
  health: z
    .strictObject({
      intervalMs: ms(
        2_000,
        'time between `/health` probes of one instance; 0 = no probes (instances count as healthy; only ' +
          'connection errors take them out)',
      ),
      timeoutMs: ms(1_000, 'a slower probe fails'),
      unhealthyAfter: z
        .int()
        .min(1)
        .default(3)
        .describe('consecutive failures (probes or connection errors) that take an instance out'),
      healthyAfter: z
        .int()
        .min(1)
        .default(2)
        .describe('consecutive successful probes that bring an unhealthy instance back'),
      path: z.string().startsWith('/').default('/health').describe('probe path on each instance'),
    })
    .prefault({})
    .describe("each coordinator's own view of instance health: active probes plus its dispatch's signals"),
  management: managementSectionSchema,
  upstream: z
    .strictObject({
      connectionsPerInstance: z.int().min(1).default(256).describe('undici pool size per instance'),
      keepAliveMs: ms(30_000, 'idle keep-alive of upstream sockets'),
    })
    .prefault({})
    .describe('connections to instances'),
  observability: z
    .strictObject({
      metrics: z.boolean().default(true).describe('serve Prometheus metrics on `GET /metrics`'),
      dashboard: z
        .boolean()
        .default(true)
        .describe('serve the dashboard on `GET /dashboard` (JSON: `GET /dashboard/api/state`)'),
      recentRequests: z
        .int()
        .min(0)
        .max(10_000)
        .default(100)
        .describe('request summaries (leg timelines) kept for the dashboard'),
      accessLog: z.boolean().default(true).describe('one `request` JSON log line per client request'),
      requireApiKey: z
        .boolean()
        .default(false)
        .describe(
          'require `Authorization: Bearer <one of server.apiKeys>` on `/metrics` and `/dashboard/api/state` ' +
            '(open the dashboard as `/dashboard#key=<key>`: the page sends the key, the fragment never leaves the browser)',
        ),
      tracing: z
        .strictObject({
          enabled: z.boolean().default(false).describe('OpenTelemetry spans per request and per leg'),
          exporter: z
            .enum(['otlp-http', 'console'])
            .default('otlp-http')
            .describe('where finished spans go: an OTLP/HTTP (JSON) endpoint, or stdout'),
          endpoint: z
            .url()
            .default('http://127.0.0.1:4318/v1/traces')
            .describe('OTLP/HTTP traces endpoint (exporter otlp-http)'),
          serviceName: z.string().min(1).default('motor-coordinator').describe('`service.name` of the spans'),
          batchDelayMs: ms(1_000, 'longest wait before finished spans are exported'),
        })
        .prefault({})
        .describe('OpenTelemetry spans (docs/observability.md)'),
    })
    .prefault({})
    .describe('metrics, dashboard, access log and tracing (docs/observability.md)'),
});

export type CoordinatorConfigInput = z.input<typeof coordinatorConfigSchema>;
export type InstanceConfig = z.output<typeof instanceConfigSchema>;
type NotResolved = 'id' | 'dispatchCapabilities' | 'engine' | engineKeys.EngineKeyField;

/** An instance after validation: capabilities and profile resolved; its keys are in `engineCredentials`. */
export interface ResolvedInstance extends Omit<InstanceConfig, NotResolved> {
  id: string;
  /** The configured engine, else `vllm` until discovery says otherwise. */
  engine: EngineKind;
  /** What the config set itself (the rest may be discovered); absent on instances from elsewhere. */
  configured?: { engine: boolean; capabilities: boolean };
  /** Index in the static list (the envelope's `instance_id`). */
  index: number;
  dispatchCapabilities: DispatchPlan[];
  profile: DispatchProfile;
  /** From `kvTransferConfig` (MultiConnector: its transport), else what a proxy reports; absent = unknown. */
  kvConnector?: string;
}

export interface CoordinatorConfig extends Omit<
  z.output<typeof coordinatorConfigSchema>,
  'instances' | 'scheduling'
> {
  instances: ResolvedInstance[];
  scheduling: CoordinatorSchedulingConfig;
  /** Direct-mode engine keys by instance id (apart from the instances, so they are never shown). */
  engineCredentials: ReadonlyMap<string, engineKeys.EngineCredentials>;
  /** Where the engine-proxy peer secret comes from (`engineProxy`); null = none. */
  peerSecret: PeerSecretSource | null;
  /** What validation accepted but the operator should see (one line each), e.g. unknown vLLM keys. */
  warnings?: readonly string[];
}

export class ConfigError extends Error {
  constructor(readonly issues: string[]) {
    super(`invalid coordinator config:\n  ${issues.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Validates a raw config object (merged from its sources) and resolves each instance; `env` for `*Env`
 * keys, `plugins` for the scheduling plugin types the config may name (default: the built-ins). Every
 * issue is reported at once: each section is parsed on its own, and the checks across sections run on
 * those that parsed. Warnings (unknown `kvTransferConfig` keys) are returned in `warnings`.
 */
export function validateCoordinatorConfig(
  raw: unknown,
  env = process.env,
  plugins?: PluginCatalog,
): CoordinatorConfig {
  const parsed = parseSections(coordinatorConfigSchema, raw ?? {}, { instances: instanceConfigSchema });
  const { data, issues } = parsed;
  const into = {
    env,
    engineCredentials: new Map(),
    issues,
    warnings: [] as string[],
    seen: new Set<string>(),
  };
  const instances = (
    parsed.entries.instances ??
    data.instances?.map((value, index) => ({ value, index })) ??
    []
  ).map(({ value, index }) => resolveInstance(value as InstanceConfig, index, into));
  const { observability, registry, server, engineProxy, scheduler, dispatch } = data;
  if (observability?.requireApiKey && server?.apiKeys.length === 0)
    issues.push('observability.requireApiKey: needs server.apiKeys');
  if (registry?.store === 'etcd' && registry.endpoints.length === 0)
    issues.push('registry.endpoints: store etcd needs at least one endpoint');
  if (server) {
    issues.push(...directReachabilityIssues(server, instances));
    const salt = tenantSaltSecret(server, env);
    if (salt.problem !== undefined) issues.push(salt.problem);
  }
  issues.push(
    ...placeholderSecretProblems([
      ...(server?.apiKeys ?? []).map((key, i) => [`server.apiKeys[${i}]`, key] as const),
      ['management.adminToken', data.management?.adminToken],
      ...[...into.engineCredentials].flatMap(([id, c]: [string, engineKeys.EngineCredentials]) => [
        [`instance ${id} apiKey`, c.apiKey] as const,
        [`instance ${id} adminApiKey`, c.adminApiKey] as const,
      ]),
    ]),
  );
  const peer = engineProxy ? peerSecretSource(engineProxy, env) : undefined;
  if (peer?.problem !== undefined) issues.push(peer.problem);
  // a bad `dispatch` or `scheduler` is reported above; `scheduling` is still checked against the defaults
  const legacy = dispatch ?? coordinatorConfigSchema.shape.dispatch.parse(undefined);
  const scheduling = resolveSchedulingSection(
    data.scheduling,
    { schedulerPolicy: scheduler?.policy, ...legacy },
    plugins,
  );
  if ('issues' in scheduling) issues.push(...scheduling.issues);
  if (issues.length > 0 || 'issues' in scheduling || peer === undefined) throw new ConfigError(issues);
  const decodeScorers = scheduling.config.library.decode.scorers.map((s) => s.type);
  into.warnings.push(...decodeFirstWarnings(data.decodeFirst, instances, decodeScorers));
  return {
    ...(data as z.output<typeof coordinatorConfigSchema>),
    instances,
    scheduling: scheduling.config,
    engineCredentials: into.engineCredentials,
    peerSecret: peer.source,
    warnings: into.warnings,
  };
}

const commaList = (v: string): string[] => v.split(',').flatMap((k) => k.trim() || []);

/** Environment variables that override config keys (listed in docs/configuration.md). */
export const ENV_OVERRIDES: readonly { env: string; path: string; parse: (value: string) => unknown }[] = [
  { env: 'MOTOR_HOST', path: 'server.host', parse: String },
  { env: 'MOTOR_PORT', path: 'server.port', parse: Number },
  { env: 'MOTOR_ADMIN_TOKEN', path: 'management.adminToken', parse: String },
  { env: 'MOTOR_MANAGEMENT_PORT', path: 'management.port', parse: Number },
  { env: 'MOTOR_API_KEYS', path: 'server.apiKeys', parse: commaList },
];

/** Overrides from the environment: unset or empty variables are ignored. */
export function configFromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { env: name, path, parse } of ENV_OVERRIDES) {
    const value = env[name];
    if (value) setPath(out, path, parse(value));
  }
  return out;
}

export interface ConfigFlags {
  config?: string;
  host?: string;
  port?: string | number;
  apiKey?: string[];
  /** `path=value` overrides, value parsed as YAML (e.g. `retry.maxAttempts=5`). */
  set?: string[];
}

export function configFromFlags(flags: ConfigFlags): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (flags.host !== undefined) setPath(out, 'server.host', flags.host);
  if (flags.port !== undefined) setPath(out, 'server.port', Number(flags.port));
  if (flags.apiKey !== undefined && flags.apiKey.length > 0) setPath(out, 'server.apiKeys', flags.apiKey);
  for (const assignment of flags.set ?? []) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new ConfigError([`--set ${assignment}: expected path=value`]);
    setPath(out, assignment.slice(0, eq), parseYaml(assignment.slice(eq + 1)) as unknown);
  }
  return out;
}

/** Reads, merges and validates: defaults < file < env < flags. */
export async function loadCoordinatorConfig(
  flags: ConfigFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CoordinatorConfig> {
  const file = flags.config ?? env.MOTOR_CONFIG;
  // a missing or unreadable file throws StructuredFileError: "config file x.yaml: not found"
  const fromFile = file ? await readStructuredMapping(file, 'config file') : {};
  return validateCoordinatorConfig(
    mergeDeep(mergeDeep(fromFile, configFromEnv(env)), configFromFlags(flags)),
    env,
  );
}

/** Sets `a.b[2].c` in a plain object tree, creating objects/arrays on the way. */
export function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys: (string | number)[] = [];
  for (const part of path.split('.')) {
    const m = /^([^[\]]+)((?:\[\d+\])*)$/.exec(part);
    if (!m) throw new ConfigError([`${path}: invalid path`]);
    keys.push(m[1]!);
    for (const idx of m[2]!.matchAll(/\[(\d+)\]/g)) keys.push(Number(idx[1]));
  }
  let node: Record<string | number, unknown> = target;
  for (let i = 0; i < keys.length - 1; i++) {
    const key = keys[i]!;
    const nextIsIndex = typeof keys[i + 1] === 'number';
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = nextIsIndex ? [] : {};
    node = node[key] as Record<string | number, unknown>;
  }
  node[keys[keys.length - 1]!] = value;
}
