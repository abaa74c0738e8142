import { stat } from 'node:fs/promises';
import { parse as parseShellWords } from 'shell-quote';
import { readStructuredFile, StructuredFileError } from '../common/structured-file.js';
import { KV_TRANSFER_CONFIG_KEY } from './constants.js';
import { VLLM_KV_TRANSFER_FIELDS } from './kv-transfer-fields.js';
import { isPlainRecord } from './python-values.js';

/**
 * Every form in which a user holds an engine's config, read into the one shape
 * `explainEngineProfile` classifies. The one home for this: `motor classify` and
 * `motor engine-proxy --engine-config` both read through here.
 */

/** How the input was given, for the user's confirmation that it was read as meant. */
export type EngineConfigForm =
  'config file' | 'inline JSON' | 'launch arguments' | 'vLLM --kv-transfer-config JSON';

export interface EngineConfigInput {
  config: unknown;
  form: EngineConfigForm;
}

/**
 * vLLM's `--kv-transfer-config` value on its own (`{"kv_connector": "NixlConnector", "kv_role":
 * "kv_both"}`) is a `KVTransferConfig`, not an engine config: a mapping whose keys are all
 * `KVTransferConfig` fields, `kv_connector` or `kv_role` among them, is wrapped as
 * `{kv_transfer_config: …}`. Anything else is returned as it is.
 */
export function wrapBareKvTransferConfig(value: unknown): { config: unknown; bare: boolean } {
  if (!isPlainRecord(value)) return { config: value, bare: false };
  const keys = Object.keys(value);
  const bare =
    (value.kv_connector !== undefined || value.kv_role !== undefined) &&
    keys.every((key) => VLLM_KV_TRANSFER_FIELDS.has(key));
  return bare ? { config: { [KV_TRANSFER_CONFIG_KEY]: value }, bare } : { config: value, bare };
}

/**
 * Engine launch arguments (`vllm serve … --kv-transfer-config '{…}'`, `python -m
 * sglang.launch_server --disaggregation-mode prefill …`) as a config keyed by flag name, which is how
 * both engines' `--config` YAML spells them (vllm-project/vllm vllm/utils/argparse_utils.py,
 * `FlexibleArgumentParser.load_config_file`; sgl-project/sglang python/sglang/srt/server_args.py,
 * `ServerArgs.add_cli_args`). `--flag value` and `--flag=value` give the value, a flag followed by
 * another flag or nothing is `true`. vLLM's dotted form `--kv-transfer-config.kv_connector X` sets
 * one field of a JSON argument (`FlexibleArgumentParser.parse_args`, dot notation). Words that are no
 * flag's value (the program, the model) are ignored.
 */
export function engineConfigFromArgs(argv: readonly string[]): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (!word.startsWith('--') || word === '--') continue;
    const eq = word.indexOf('=');
    let name = eq < 0 ? word.slice(2) : word.slice(2, eq);
    let value: unknown;
    if (eq >= 0) value = word.slice(eq + 1);
    else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) value = argv[++i];
    else value = true;
    const dot = name.indexOf('.');
    if (dot > 0) {
      const field = name.slice(dot + 1);
      name = name.slice(0, dot);
      const parent = config[name];
      const object = isPlainRecord(parent) ? parent : {};
      object[field] = value;
      value = object;
    }
    config[name] = value;
  }
  return config;
}

/** Shell words of an argument string: quotes and `\`-newline continuations as a shell reads them. */
function shellWords(text: string): string[] {
  // a `$VAR` stays as written: Motor has no business expanding the user's environment
  const entries = parseShellWords(text, (key) => `$${key}`);
  return entries.filter((e): e is string => typeof e === 'string' && e !== '');
}

/** A word that is an argument string rather than a path: it starts with a flag or has one after a space. */
const LAUNCH_ARGUMENTS = /^\s*-|\s--[A-Za-z]/;

/**
 * Reads an engine config from what the user typed: several words (launch arguments split by the
 * shell), one word that is inline JSON (`{…}`) or an argument string (`--kv-transfer-config '{…}'`),
 * else a JSON or YAML file. A bare `KVTransferConfig`, inline or in a file, is wrapped. Throws
 * `StructuredFileError` with one line naming `label` and the fix.
 */
export async function readEngineConfig(
  input: string | readonly string[],
  label: string,
): Promise<EngineConfigInput> {
  const words = typeof input === 'string' ? [input] : input;
  if (words.length === 0)
    throw new StructuredFileError(`${label}: give a file, inline JSON or launch arguments`);
  if (words.length > 1) return { config: engineConfigFromArgs(words), form: 'launch arguments' };
  const text = words[0]!;
  if (text.trimStart().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch (err) {
      throw new StructuredFileError(
        `${label}: inline JSON does not parse (${(err as Error).message}); quote it in single quotes`,
      );
    }
    const { config, bare } = wrapBareKvTransferConfig(parsed);
    return { config, form: bare ? 'vLLM --kv-transfer-config JSON' : 'inline JSON' };
  }
  if (LAUNCH_ARGUMENTS.test(text) && !(await isReadableFile(text)))
    return { config: engineConfigFromArgs(shellWords(text)), form: 'launch arguments' };
  const { config, bare } = wrapBareKvTransferConfig(await readStructuredFile(text, label));
  return { config, form: bare ? 'vLLM --kv-transfer-config JSON' : 'config file' };
}

async function isReadableFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
