/**
 * Motor's reading of a handoff prefill's `kv_transfer_params`, by `kv_connector` (lower-cased):
 * the keys Motor relies on when it hands the answer verbatim to the decode and times the handoff.
 * Facts of test/fixtures/engines/README.md, each read from upstream:
 * - vLLM NIXL (2026-01 `nixl_connector.py` and newest `…/v1/nixl/pull_scheduler.py`
 *   `request_finished`): `remote_engine_id`, `remote_request_id`, `remote_host`, `remote_port` are
 *   required by the decode's `update_state_after_alloc` (fact 14), `tp_size` by its heartbeat
 *   (`on_new_request`, fact 13); newest answers carry `transfer_mode: "pull"` (fact 14).
 * - vLLM `NixlPushConnector` (`…/v1/nixl/push_scheduler.py` `request_finished`): the same keys with
 *   `transfer_mode: "push"` (fact 45).
 * - vllm-ascend Mooncake V1 / Hybrid (`…/kv_p2p/mooncake_connector.py`, `mooncake_hybrid_connector.py`
 *   `request_finished`): `last_token_id`, `num_prompt_blocks`, `remote_multi_nodes_meta_mapping`
 *   in every release (fact 25); `remote_request_id` only from v0.14.0rc1 (fact 30), so not required.
 */

type Shape = 'string' | 'port' | 'array' | 'integer' | 'object' | 'present';

export interface ParamRule {
  key: string;
  shape: Shape;
  /** A literal value the key must have. */
  equals?: boolean | string;
  /** A key that may be absent, but must have `equals` when present. */
  optional?: true;
  fact: number;
}

/** Every vLLM handoff answer: the direction flags and the address of the blocks. */
const COMMON: readonly ParamRule[] = [
  { key: 'do_remote_prefill', shape: 'present', equals: true, fact: 14 },
  { key: 'do_remote_decode', shape: 'present', equals: false, fact: 14 },
  { key: 'remote_engine_id', shape: 'string', fact: 14 },
  { key: 'remote_host', shape: 'string', fact: 14 },
  { key: 'remote_port', shape: 'port', fact: 14 },
  { key: 'remote_block_ids', shape: 'array', fact: 14 },
];

const NIXL: readonly ParamRule[] = [
  ...COMMON,
  { key: 'remote_request_id', shape: 'string', fact: 14 },
  { key: 'tp_size', shape: 'integer', fact: 13 },
];

const MOONCAKE: readonly ParamRule[] = [
  ...COMMON,
  { key: 'last_token_id', shape: 'integer', fact: 25 },
  { key: 'num_prompt_blocks', shape: 'integer', fact: 25 },
  { key: 'remote_multi_nodes_meta_mapping', shape: 'object', fact: 25 },
];

const BY_CONNECTOR: Readonly<Record<string, readonly ParamRule[]>> = {
  nixlconnector: [
    ...NIXL,
    { key: 'transfer_mode', shape: 'string', equals: 'pull', optional: true, fact: 14 },
  ],
  nixlpullconnector: [
    ...NIXL,
    { key: 'transfer_mode', shape: 'string', equals: 'pull', optional: true, fact: 14 },
  ],
  nixlpushconnector: [...NIXL, { key: 'transfer_mode', shape: 'string', equals: 'push', fact: 45 }],
  mooncakeconnectorv1: MOONCAKE,
  mooncakehybridconnector: MOONCAKE,
};

/** The rules for a connector; an unnamed or unlisted connector gets the keys every handoff has. */
export function handoffParamRules(connector: string | undefined): readonly ParamRule[] {
  return (connector && BY_CONNECTOR[connector.trim().toLowerCase()]) || COMMON;
}

function hasShape(value: unknown, shape: Shape): boolean {
  switch (shape) {
    case 'string':
      return typeof value === 'string' && value.length > 0;
    case 'port':
      return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535;
    case 'array':
      return Array.isArray(value);
    case 'integer':
      return Number.isInteger(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'present':
      return value !== undefined;
  }
}

export interface ParamMismatch {
  rule: ParamRule;
  /** What the answer had for the key (`absent` when missing). */
  seen: string;
}

/** The rules the params break, in rule order. */
export function paramMismatches(
  params: Readonly<Record<string, unknown>>,
  rules: readonly ParamRule[],
): ParamMismatch[] {
  const out: ParamMismatch[] = [];
  for (const rule of rules) {
    const value = params[rule.key];
    if (value === undefined) {
      if (!rule.optional) out.push({ rule, seen: 'absent' });
      continue;
    }
    const wrong = !hasShape(value, rule.shape) || (rule.equals !== undefined && value !== rule.equals);
    if (wrong) out.push({ rule, seen: JSON.stringify(value).slice(0, 60) });
  }
  return out;
}

/** `key: expectation` for one rule, as a report cell. */
export function describeRule(rule: ParamRule): string {
  const article = /^[aeiou]/.test(rule.shape) ? 'an' : 'a';
  const what = rule.equals !== undefined ? JSON.stringify(rule.equals) : `${article} ${rule.shape}`;
  return `${rule.key} ${rule.optional ? 'absent or ' : ''}${what}`;
}
