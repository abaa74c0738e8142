/**
 * Which vLLM `kv_connector` names classify as which dispatch profile. The seed's table is kept as the
 * seed has it; Motor's table is a deliberate superset with connector names registered after the seed
 * was written (docs/protocol.md, "Classification: the seed and Motor's superset").
 */
export interface ConnectorTable {
  /** Lower-cased names whose prefill returns a KV handle the decode reads (`handoff`). */
  readonly handoff: ReadonlySet<string>;
  /** Lower-cased names whose decode drives the prefill through a metaserver (`trigger`). */
  readonly trigger: ReadonlySet<string>;
}

/** The seed's own whitelist (`_VLLM_HANDOFF_CONNECTORS`, `_VLLM_TRIGGER_CONNECTORS` in dispatch_protocol.py). */
export const SEED_CONNECTORS: ConnectorTable = Object.freeze({
  handoff: new Set(['mooncakeconnectorv1', 'mooncakehybridconnector', 'nixlconnector']),
  trigger: new Set(['mooncakelayerwiseconnector']),
});

/**
 * Newer vLLM registers the NIXL connector under three names (vllm-project/vllm
 * vllm/distributed/kv_transfer/kv_connector/factory.py, `KVConnectorFactory.register_connector`
 * calls for "NixlConnector", "NixlPullConnector", "NixlPushConnector", all from `…/v1/nixl`;
 * `…/v1/nixl/connector.py` keeps `NixlConnector = NixlPullConnector` for compatibility). Both run
 * the router flow of a handoff: prefill first, its `kv_transfer_params` verbatim to the decode; in
 * push mode the decode then registers its blocks with the prefill, which writes into them
 * (`…/v1/nixl/push_scheduler.py` `NixlPushConnectorScheduler`).
 */
const NEWER_HANDOFF_CONNECTORS = ['nixlpullconnector', 'nixlpushconnector'] as const;

/** Motor's table: the seed's plus the newer handoff names. */
export const MOTOR_CONNECTORS: ConnectorTable = Object.freeze({
  handoff: new Set([...SEED_CONNECTORS.handoff, ...NEWER_HANDOFF_CONNECTORS]),
  trigger: SEED_CONNECTORS.trigger,
});

/**
 * The connector names Motor classifies, spelled as vLLM registers them (`KVConnectorFactory.register_connector`
 * calls in vllm/distributed/kv_transfer/kv_connector/factory.py), for suggesting the nearest to a typo.
 * `MultiConnector` is read through its first entry.
 */
export const KNOWN_CONNECTOR_NAMES: readonly string[] = [
  'NixlConnector',
  'NixlPullConnector',
  'NixlPushConnector',
  'MooncakeConnectorV1',
  'MooncakeHybridConnector',
  'MooncakeLayerwiseConnector',
  'MultiConnector',
];

/**
 * The KV wire a connector name stands for, for pairing: names that are one class upstream
 * (`NixlConnector` is `NixlPullConnector`, same source) read each other's blocks; anything else is
 * its own family, as written. Pull and push NIXL are different wires: a push decode waits for the
 * prefill's WRITE, a pull prefill waits for the decode's READ.
 */
export function kvConnectorFamily(connector: string): string {
  return connector.trim().toLowerCase() === 'nixlpullconnector' ? 'NixlConnector' : connector;
}
