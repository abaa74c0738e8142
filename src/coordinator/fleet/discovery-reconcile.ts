import type { ResolvedInstance } from '../../config/coordinator-config.js';
import {
  resolveSglangBootstrapPort,
  urlPort,
  type SglangServerInfo,
} from '../../engine-adapters/sglang-server-info.js';
import {
  dispatchPlansFromCapabilities,
  enumValues,
  DispatchProfile,
  ENGINE_KINDS,
  type DispatchPlan,
  type EngineKind,
} from '../../protocol/index.js';
import { profileFromCapabilities } from './registry-instance-source.js';

/** The fields of `GET /v1/motor/info` discovery reads (src/engine-proxy/health-info.ts `proxyInfo`). */
export interface ProxyInfo {
  engine: EngineKind | null;
  role: string | null;
  dispatchProfile: string | null;
  dispatchCapabilities: DispatchPlan[];
  /** The KV connector the proxy classified from its engine config; null for SGLang or none. */
  kvConnector: string | null;
  /** The envelope roles the proxy accepts (`prefill`, `decode`, `single`); null when not reported. */
  acceptsRoles: string[] | null;
}

/** What one discovery round read from an instance; `error` says why a source could not be read. */
export type DiscoveryProbe =
  | { kind: 'proxy'; info: ProxyInfo | null; error: string | null; models: string[] | null }
  | { kind: 'sglang'; info: SglangServerInfo | null; error: string | null; models: string[] | null }
  | { kind: 'engine'; models: string[] | null };

/** What discovery changes on a static instance, and what `/ready` and the start-up log say about it. */
export interface DiscoveryOutcome {
  engine?: EngineKind;
  dispatchCapabilities?: DispatchPlan[];
  profile?: DispatchProfile;
  /** The proxy's KV connector, when the config names none (pairs form within one connector). */
  kvConnector?: string;
  bootstrapPort?: number;
  /** Models the engine lists (`/v1/models` shows them when the config lists none). */
  reportedModels: string[];
  /** Why the instance must not be scheduled; null = schedulable. */
  blocked: string | null;
  /** Disagreements and failed reads, one line each (warnings and `/ready` reasons). */
  notes: string[];
}

const PROFILES: readonly string[] = enumValues(DispatchProfile);

/** The envelope role the coordinator sends an instance of `role` (src/engine-proxy/envelope.ts ROLE_ACCEPTS). */
const LEG_ROLE: Record<ResolvedInstance['role'], string> = {
  prefill: 'prefill',
  decode: 'decode',
  union: 'single',
};

/** SGLang `disaggregation_mode` per instance role (`null`: no P/D, a union engine). */
const SGLANG_MODE: Record<ResolvedInstance['role'], SglangServerInfo['disaggregationMode']> = {
  prefill: 'prefill',
  decode: 'decode',
  union: null,
};

/** Reads a `/v1/motor/info` body; null when it is not one. */
export function parseProxyInfo(json: unknown): ProxyInfo | null {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return null;
  const body = json as Record<string, unknown>;
  if (body.object !== 'motor.engine_proxy_info') return null;
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  const engine = str(body.engine);
  return {
    engine:
      engine !== null && (ENGINE_KINDS as readonly string[]).includes(engine) ? (engine as EngineKind) : null,
    role: str(body.role),
    dispatchProfile: str(body.dispatch_profile),
    dispatchCapabilities: [...dispatchPlansFromCapabilities(body.dispatch_capabilities)],
    kvConnector: str(body.kv_connector),
    acceptsRoles: Array.isArray(body.accepts_roles)
      ? body.accepts_roles.filter((r): r is string => typeof r === 'string')
      : null,
  };
}

/** Ids of an OpenAI `/v1/models` list body; null when it is not one. */
export function parseModelList(json: unknown): string[] | null {
  if (typeof json !== 'object' || json === null) return null;
  const data = (json as { data?: unknown }).data;
  if (!Array.isArray(data)) return null;
  const ids: string[] = [];
  for (const entry of data) {
    const id = (entry as { id?: unknown } | null)?.id;
    if (typeof id === 'string' && id !== '') ids.push(id);
  }
  return ids;
}

/** Not discovered yet: a proxy instance whose config names no capability waits (fail closed). */
export function pendingOutcome(configured: ResolvedInstance): DiscoveryOutcome {
  const waits = configured.mode === 'proxy' && configured.configured?.capabilities === false;
  return {
    reportedModels: [],
    blocked: waits ? `capabilities not discovered yet (GET ${configured.url}/v1/motor/info)` : null,
    notes: [],
    ...directBootstrap(configured, null),
  };
}

/**
 * Merges what an instance reported with its config: configured values win (they are overrides),
 * a disagreement is a note. A proxy that would refuse the configured role blocks the instance, as
 * does a proxy instance whose capabilities stay unknown.
 */
export function reconcile(configured: ResolvedInstance, probe: DiscoveryProbe): DiscoveryOutcome {
  const notes: string[] = [];
  const out: DiscoveryOutcome = { reportedModels: probe.models ?? [], blocked: null, notes };
  if (probe.kind === 'proxy') reconcileProxy(configured, probe, out);
  else if (probe.kind === 'sglang') reconcileSglang(configured, probe, out);
  return out;
}

function reconcileProxy(
  configured: ResolvedInstance,
  probe: Extract<DiscoveryProbe, { kind: 'proxy' }>,
  out: DiscoveryOutcome,
): void {
  const facts = configured.configured;
  const info = probe.info;
  if (info === null) {
    const why = `GET ${configured.url}/v1/motor/info failed: ${probe.error ?? 'not a Motor engine proxy'}`;
    if (facts?.capabilities === false) out.blocked = `capabilities unknown: ${why}`;
    else out.notes.push(why);
    return;
  }
  if (info.role !== null && info.role !== configured.role) {
    const accepted = info.acceptsRoles?.includes(LEG_ROLE[configured.role]) ?? false;
    const line = `role: config says ${configured.role}, the proxy serves ${info.role}`;
    if (accepted) out.notes.push(line);
    else out.blocked = `${line} and refuses ${LEG_ROLE[configured.role]} legs`;
  }
  const engine = facts?.engine ? configured.engine : (info.engine ?? configured.engine);
  if (facts?.engine && info.engine !== null && info.engine !== configured.engine)
    out.notes.push(`engine: config says ${configured.engine}, the proxy reports ${info.engine}`);
  out.engine = engine;
  if (configured.kvConnector === undefined) {
    if (info.kvConnector !== null) out.kvConnector = info.kvConnector;
  } else if (info.kvConnector !== null && info.kvConnector !== configured.kvConnector)
    out.notes.push(
      `kv connector: config says ${configured.kvConnector}, the proxy reports ${info.kvConnector}`,
    );
  if (facts?.capabilities !== false) {
    if (!samePlans(configured.dispatchCapabilities, info.dispatchCapabilities))
      out.notes.push(
        `dispatch capabilities: config says ${list(configured.dispatchCapabilities)}, the proxy reports ` +
          `${list(info.dispatchCapabilities)} (config wins)`,
      );
    return;
  }
  out.dispatchCapabilities = info.dispatchCapabilities;
  out.profile =
    info.dispatchProfile !== null && PROFILES.includes(info.dispatchProfile)
      ? (info.dispatchProfile as DispatchProfile)
      : profileFromCapabilities(info.dispatchCapabilities, engine);
  if (info.dispatchCapabilities.length === 0 && configured.role !== 'union')
    out.blocked = 'the proxy advertises no dispatch capability (unknown profile)';
}

function reconcileSglang(
  configured: ResolvedInstance,
  probe: Extract<DiscoveryProbe, { kind: 'sglang' }>,
  out: DiscoveryOutcome,
): void {
  Object.assign(out, directBootstrap(configured, probe.info));
  if (probe.info === null) {
    out.notes.push(`server info: ${probe.error ?? 'no answer'}`);
    return;
  }
  const expected = SGLANG_MODE[configured.role];
  const mode = probe.info.disaggregationMode;
  // SGLang's Rust server lists no ServerArgs in /server_info: its mode cannot be checked there.
  if (probe.info.rustFrontend && mode === null) {
    out.notes.push('SGLang Rust server: disaggregation_mode not reported, role not checked');
    return;
  }
  if (mode !== expected)
    out.blocked = `role: config says ${configured.role}, SGLang runs disaggregation_mode ${mode ?? 'null'}`;
}

/** Direct SGLang: the bootstrap port both legs get (the rule: sglang-server-info.ts `resolveSglangBootstrapPort`). */
function directBootstrap(
  configured: ResolvedInstance,
  info: SglangServerInfo | null,
): Pick<DiscoveryOutcome, 'bootstrapPort'> {
  if (configured.mode !== 'direct' || configured.engine !== 'sglang') return {};
  return {
    bootstrapPort: resolveSglangBootstrapPort(info, configured.bootstrapPort ?? null, {
      port: urlPort(configured.url),
      onHttpPort: configured.bootstrapOnHttpPort === true,
    }).port,
  };
}

function samePlans(a: readonly string[], b: readonly string[]): boolean {
  return [...a].sort().join(',') === [...b].sort().join(',');
}

const list = (plans: readonly string[]): string => (plans.length > 0 ? plans.join(', ') : 'none');
