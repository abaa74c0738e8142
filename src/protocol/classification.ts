import {
  DISPATCH_PROFILE_KEY,
  KV_CONNECTOR_EXTRA_CONFIG_KEY,
  KV_CONNECTOR_KEY,
  KV_CONNECTORS_KEY,
  KV_TRANSFER_CONFIG_KEY,
} from './constants.js';
import { DispatchPlan, DispatchProfile } from './enums.js';
import { configGet, isPlainRecord, normalized, pyRepr, pyStr, pyTruthy } from './python-values.js';
import { KNOWN_CONNECTOR_NAMES, SEED_CONNECTORS, type ConnectorTable } from './connector-table.js';
import { didYouMean } from '../common/did-you-mean.js';

const SUPERSET_NOTE = " (a newer vLLM name: Motor's superset; the seed says unknown)";

const ALLOWED_EXPLICIT_PROFILES = [
  DispatchProfile.TRIGGER,
  DispatchProfile.HANDOFF,
  DispatchProfile.BOOTSTRAP,
];

/** Raised for an invalid explicit `dispatch_profile`, like the seed's `ValueError`. */
export class DispatchProfileError extends Error {
  constructor(readonly value: unknown) {
    super(
      `Unsupported dispatch_profile ${pyRepr(value)}. Allowed values: ${ALLOWED_EXPLICIT_PROFILES.join(', ')}.`,
    );
    this.name = 'DispatchProfileError';
  }
}

/** A classification together with the config key that decided it (for `motor classify`). */
export interface ProfileExplanation {
  profile: DispatchProfile;
  /** Dotted path of the deciding key, e.g. `kv_transfer_config.kv_connector`. */
  decidedBy: string;
  reason: string;
  /**
   * The connector that moves the KV cache, as configured: `kv_connector`, or for `MultiConnector` its
   * first (transport) entry's. Absent when the config names none. Pairs only form within one connector.
   */
  kvConnector?: string;
}

/**
 * Classify vLLM P/D coordination semantics from an explicit profile or the connector whitelist: the
 * seed's answer (its whitelist). Motor's superset is `explainEngineProfile` (engine-profile.ts).
 */
export function classifyVllmDispatchProfile(
  engineConfig: unknown,
  explicitProfile?: unknown,
): DispatchProfile {
  return explainVllmDispatchProfile(engineConfig, explicitProfile).profile;
}

/** As {@link classifyVllmDispatchProfile}, with the deciding key; `connectors` defaults to the seed's. */
export function explainVllmDispatchProfile(
  engineConfig: unknown,
  explicitProfile?: unknown,
  connectors: ConnectorTable = SEED_CONNECTORS,
): ProfileExplanation {
  const fromArgument = pyTruthy(explicitProfile);
  const explicit = fromArgument ? explicitProfile : configGet(engineConfig, DISPATCH_PROFILE_KEY);
  const profile = parseExplicitProfile(explicit);
  const byConnector = classifyKvTransferConfig(
    configGet(engineConfig, KV_TRANSFER_CONFIG_KEY, {}),
    KV_TRANSFER_CONFIG_KEY,
    connectors,
  );
  if (profile === null) return byConnector;
  // An explicit profile decides the plan; the connector still decides who can read whose KV cache.
  const decidedBy = fromArgument ? 'explicit dispatch_profile argument' : DISPATCH_PROFILE_KEY;
  const { kvConnector } = byConnector;
  return {
    profile,
    decidedBy,
    reason: `explicit profile ${pyRepr(explicit)}`,
    ...(kvConnector !== undefined ? { kvConnector } : {}),
  };
}

function classifyKvTransferConfig(
  kvTransferConfig: unknown,
  path: string,
  connectors: ConnectorTable,
): ProfileExplanation {
  if (!isPlainRecord(kvTransferConfig)) {
    return unknown(path, `there is no ${path} object, so nothing names the KV connector`);
  }
  const connectorPath = `${path}.${KV_CONNECTOR_KEY}`;
  const connector = normalized(kvTransferConfig[KV_CONNECTOR_KEY]);
  if (connector === 'multiconnector') return classifyMultiConnector(kvTransferConfig, path, connectors);
  // Kept as written: vLLM finds the connector class by the exact name (vllm-project/vllm
  // vllm/distributed/kv_transfer/kv_connector/factory.py, `KVConnectorFactory._registry` is a dict).
  const named = connector === '' ? {} : { kvConnector: pyStr(kvTransferConfig[KV_CONNECTOR_KEY]) };
  const shown = pyRepr(pyStr(kvTransferConfig[KV_CONNECTOR_KEY]));
  if (connectors.handoff.has(connector)) {
    return {
      profile: DispatchProfile.HANDOFF,
      decidedBy: connectorPath,
      reason:
        `${shown} is a handoff connector: the decode reads the KV cache the prefill wrote` +
        (SEED_CONNECTORS.handoff.has(connector) ? '' : SUPERSET_NOTE),
      ...named,
    };
  }
  if (connectors.trigger.has(connector)) {
    return {
      profile: DispatchProfile.TRIGGER,
      decidedBy: connectorPath,
      reason: `${shown} is a trigger connector: the decode's connector starts the prefill`,
      ...named,
    };
  }
  const reason =
    connector === ''
      ? `${path} names no ${KV_CONNECTOR_KEY}, so this engine is never paired (fail closed)`
      : `${shown} is not a P/D connector Motor knows, so this engine is never paired (fail closed)` +
        didYouMean(pyStr(kvTransferConfig[KV_CONNECTOR_KEY]), KNOWN_CONNECTOR_NAMES);
  return { ...unknown(connectorPath, reason), ...named };
}

function classifyMultiConnector(
  kvTransferConfig: Record<string, unknown>,
  path: string,
  connectors: ConnectorTable,
): ProfileExplanation {
  const extraPath = `${path}.${KV_CONNECTOR_EXTRA_CONFIG_KEY}`;
  const extraConfig = configGet(kvTransferConfig, KV_CONNECTOR_EXTRA_CONFIG_KEY, {});
  if (!isPlainRecord(extraConfig)) return unknown(extraPath, `${extraPath} is not an object`);
  const connectorsPath = `${extraPath}.${KV_CONNECTORS_KEY}`;
  const entries = configGet(extraConfig, KV_CONNECTORS_KEY, []);
  if (!Array.isArray(entries) || entries.length < 2) {
    return unknown(
      connectorsPath,
      `MultiConnector needs a list of at least 2 connectors in ${connectorsPath}`,
    );
  }
  const transport: unknown = entries[0];
  if (!isPlainRecord(transport))
    return unknown(`${connectorsPath}[0]`, `${connectorsPath}[0] is not an object`);
  return classifyKvTransferConfig(transport, `${connectorsPath}[0]`, connectors);
}

function unknown(decidedBy: string, reason: string): ProfileExplanation {
  return { profile: DispatchProfile.UNKNOWN, decidedBy, reason };
}

function parseExplicitProfile(value: unknown): DispatchProfile | null {
  if (value === null || value === undefined) return null;
  const text = pyStr(value).trim().toLowerCase();
  if (!text) return null;
  if (text === DispatchPlan.PREFILL_HANDOFF_DECODE) return DispatchProfile.HANDOFF;
  if (text === DispatchPlan.CONCURRENT_ENGINE_SYNC) return DispatchProfile.TRIGGER;
  if (text === DispatchProfile.UNKNOWN) return null;
  if ((ALLOWED_EXPLICIT_PROFILES as string[]).includes(text)) return text as DispatchProfile;
  throw new DispatchProfileError(value);
}

/** The seed's IConfig-like object: an endpoint config reached by a getter or held as plain data. */
export interface EndpointConfigSource {
  get_endpoint_config?: () => unknown;
  endpoint_config?: unknown;
}

/** Resolve the vLLM dispatch profile from an engine-server config (`engine_type`, `deploy_config`). */
export function inferVllmDispatchProfileFromConfig(
  config: EndpointConfigSource | null | undefined,
): DispatchProfile {
  if (config === null || config === undefined) return DispatchProfile.UNKNOWN;
  const endpointConfig =
    typeof config.get_endpoint_config === 'function' ? config.get_endpoint_config() : config.endpoint_config;
  if (endpointConfig === null || endpointConfig === undefined) return DispatchProfile.UNKNOWN;
  if (normalized(configGet(endpointConfig, 'engine_type')) !== 'vllm') return DispatchProfile.UNKNOWN;
  const deployConfig = configGet(endpointConfig, 'deploy_config');
  if (deployConfig === null || deployConfig === undefined) return DispatchProfile.UNKNOWN;
  return classifyVllmDispatchProfile(
    configGet(deployConfig, 'engine_config'),
    configGet(deployConfig, DISPATCH_PROFILE_KEY),
  );
}

export function dispatchCapabilitiesForProfile(profile: DispatchProfile): DispatchPlan[] {
  if (profile === DispatchProfile.HANDOFF) return [DispatchPlan.PREFILL_HANDOFF_DECODE];
  if (profile === DispatchProfile.TRIGGER || profile === DispatchProfile.BOOTSTRAP) {
    return [DispatchPlan.CONCURRENT_ENGINE_SYNC];
  }
  return [];
}
