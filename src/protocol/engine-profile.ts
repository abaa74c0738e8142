import { explainVllmDispatchProfile, type ProfileExplanation } from './classification.js';
import { MOTOR_CONNECTORS, SEED_CONNECTORS } from './connector-table.js';
import { KV_TRANSFER_CONFIG_KEY } from './constants.js';
import { configGet, isPlainRecord, normalized } from './python-values.js';
import { didYouMean } from '../common/did-you-mean.js';
import { DispatchProfile } from './enums.js';

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
 * SGLang's `ServerArgs.disaggregation_mode` values (`null` is a server that is not disaggregated, so it
 * runs no bootstrap server) and `DISAGG_TRANSFER_BACKEND_CHOICES`, both in sgl-project/sglang
 * python/sglang/srt/server_args.py (main, 2026; v0.5 has the same modes and backends without `mori`).
 * SGLang refuses to start with a value outside them; Motor names the nearest instead of pairing it.
 */
const SGLANG_DISAGGREGATION_MODES = ['null', 'prefill', 'decode'] as const;
const SGLANG_TRANSFER_BACKENDS = ['mooncake', 'nixl', 'ascend', 'fake', 'mori', 'mooncake_tcp'] as const;

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
    const invalid = sglangArgumentProblem(config);
    if (invalid !== undefined) return { engine: kind, profile: DispatchProfile.UNKNOWN, ...invalid, skipped };
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

/** The value of an SGLang server argument, in either spelling (`--config` YAML uses dashes). */
function sglangArgument(config: unknown, name: string): { key: string; value: string } | undefined {
  if (!isPlainRecord(config)) return undefined;
  for (const key of [name, name.replaceAll('_', '-')]) {
    if (config[key] !== undefined) return { key, value: String(config[key]) };
  }
  return undefined;
}

/** Why an SGLang server with these arguments never pairs, or `undefined` when it can. */
function sglangArgumentProblem(config: unknown): { decidedBy: string; reason: string } | undefined {
  const mode = sglangArgument(config, 'disaggregation_mode');
  if (mode !== undefined && mode.value === 'null')
    return {
      decidedBy: mode.key,
      reason: `${mode.key} is null, so this SGLang server is not disaggregated and is never paired; set prefill or decode`,
    };
  if (mode !== undefined && !(SGLANG_DISAGGREGATION_MODES as readonly string[]).includes(mode.value))
    return {
      decidedBy: mode.key,
      reason:
        `${mode.key} '${mode.value}' is not one of ${SGLANG_DISAGGREGATION_MODES.join(', ')}` +
        didYouMean(mode.value, SGLANG_DISAGGREGATION_MODES),
    };
  const backend = sglangArgument(config, 'disaggregation_transfer_backend');
  if (backend !== undefined && !(SGLANG_TRANSFER_BACKENDS as readonly string[]).includes(backend.value))
    return {
      decidedBy: backend.key,
      reason:
        `${backend.key} '${backend.value}' is not an SGLang transfer backend ` +
        `(${SGLANG_TRANSFER_BACKENDS.join(', ')})` +
        didYouMean(backend.value, SGLANG_TRANSFER_BACKENDS),
    };
  return undefined;
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
