import { explainVllmDispatchProfile, type ProfileExplanation } from './classification.js';
import { MOTOR_CONNECTORS, SEED_CONNECTORS } from './connector-table.js';
import { KV_TRANSFER_CONFIG_KEY } from './constants.js';
import { configGet, isPlainRecord, normalized } from './python-values.js';

export const ENGINE_KINDS = ['vllm', 'sglang'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** An engine's profile, with the keys that were present but did not take part, and why. */
export type EngineProfileExplanation = ProfileExplanation & { engine: EngineKind; skipped: string[] };

/**
 * vLLM's CLI spelling of `kv_transfer_config`: `vllm serve --config file.yaml` takes flag names as keys,
 * dashes or underscores, and a mapping or a JSON string as the value (vllm-project/vllm
 * vllm/utils/argparse_utils.py, `FlexibleArgumentParser.load_config_file` and `parse_args`, main
 * 00da11e3).
 */
const KV_TRANSFER_CONFIG_CLI_KEY = 'kv-transfer-config';

/**
 * Keys only SGLang's server arguments have (`ServerArgs.disaggregation_mode` & co. in sgl-project/sglang
 * python/sglang/srt/server_args.py; a `--config` YAML spells them with dashes,
 * docs/advanced_features/server_arguments.md): a file with one of them is SGLang's.
 */
const SGLANG_SERVER_ARG = /^(disaggregation[-_]|model[-_]path$)/;

/**
 * Profile of one engine from its config file. Accepts the vLLM engine config itself
 * (`kv_transfer_config` or `kv-transfer-config`, `dispatch_profile`), vLLM's or SGLang's `--config`
 * YAML, or the seed's endpoint-config shape (`engine_type` + `deploy_config.engine_config`, or a
 * top-level `kv_transfer_config` beside `engine_type`). SGLang engines coordinate through bootstrap
 * rooms. Throws `DispatchProfileError` for an invalid explicit profile. vLLM connectors are read with
 * Motor's table (newer names included); `strict` gives the seed's answer.
 */
export function explainEngineProfile(
  config: unknown,
  engine?: EngineKind,
  explicitProfile?: string,
  options: { strict?: boolean } = {},
): EngineProfileExplanation {
  const skipped: string[] = [];
  const engineType = normalized(configGet(config, 'engine_type'));
  const sglangKey = isPlainRecord(config)
    ? Object.keys(config).find((k) => SGLANG_SERVER_ARG.test(k))
    : undefined;
  const kind = engine ?? (engineType === 'sglang' || (!engineType && sglangKey) ? 'sglang' : 'vllm');
  if (kind === 'sglang') {
    const connectorKey = kvTransferKeys(config)[0];
    if (connectorKey !== undefined)
      skipped.push(`${connectorKey}: a vLLM key; SGLang engines rendezvous by bootstrap room`);
    const why = engine ? '' : engineType ? ' (engine_type)' : ` (SGLang server argument ${sglangKey})`;
    return {
      engine: kind,
      profile: 'bootstrap',
      decidedBy: 'engine',
      reason: `SGLang engines rendezvous by bootstrap room${why}`,
      skipped,
    };
  }
  const deploy = configGet(config, 'deploy_config');
  const deployProfile = configGet(deploy, 'dispatch_profile');
  const nested = configGet(deploy, 'engine_config');
  // the endpoint form's engine config, else the file itself (a top-level kv_transfer_config beside
  // engine_type included)
  const prefix = nested === undefined || nested === null ? '' : 'deploy_config.engine_config.';
  if (prefix)
    for (const key of kvTransferKeys(config))
      skipped.push(`${key} (top level): deploy_config.engine_config is the engine's config`);
  const { view, key } = vllmView(prefix ? nested : config, prefix, skipped);
  const explanation = explainVllmDispatchProfile(
    view,
    explicitProfile || deployProfile,
    options.strict ? SEED_CONNECTORS : MOTOR_CONNECTORS,
  );
  let decidedBy = explanation.decidedBy;
  if (decidedBy.startsWith('explicit')) {
    if (!explicitProfile && deployProfile) decidedBy = 'deploy_config.dispatch_profile';
  } else {
    decidedBy = prefix + decidedBy.replace(KV_TRANSFER_CONFIG_KEY, key ?? KV_TRANSFER_CONFIG_KEY);
  }
  return { engine: kind, ...explanation, decidedBy, skipped };
}

/** The `kv_transfer_config` spellings present in `config`, Motor's first. */
function kvTransferKeys(config: unknown): string[] {
  if (!isPlainRecord(config)) return [];
  return [KV_TRANSFER_CONFIG_KEY, KV_TRANSFER_CONFIG_CLI_KEY].filter((k) => config[k] !== undefined);
}

/**
 * A vLLM engine config with `kv-transfer-config` read as `kv_transfer_config` (and a JSON string
 * value parsed, as vLLM's flag parser does); one spelling wins, the other is reported as skipped.
 */
function vllmView(
  config: unknown,
  prefix: string,
  skipped: string[],
): { view: unknown; key: string | undefined } {
  if (!isPlainRecord(config)) return { view: config, key: undefined };
  const [key, ...others] = kvTransferKeys(config);
  for (const other of others) skipped.push(`${prefix}${other}: ${prefix}${key} is given too`);
  if (key === undefined) return { view: config, key };
  let value = config[key];
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      skipped.push(`${prefix}${key}: not valid JSON`);
      value = undefined;
    }
  }
  return { view: { ...config, [KV_TRANSFER_CONFIG_KEY]: value }, key };
}
