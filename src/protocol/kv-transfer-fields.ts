/**
 * The fields of vLLM's `KVTransferConfig` (vllm-project/vllm vllm/config/kv_transfer.py, class
 * `KVTransferConfig`, main 9dc4946; the older 007c643 lacks `enable_permute_local_kv` and
 * `kv_load_failure_policy`). At 007c643 the class is a pydantic dataclass with the default config
 * (vllm/config/utils.py `config` at 00ba1f4 returns the class unchanged), so vLLM drops a key it does
 * not know silently: a typo such as `kv_conector` leaves the engine without a connector, and Motor's
 * classification sees none either. Motor warns rather than fails: releases add fields (two since
 * 007c643), and an unknown key in Motor's copy does not stop Motor from serving.
 */
export const VLLM_KV_TRANSFER_FIELDS: ReadonlySet<string> = new Set([
  'kv_connector',
  'engine_id',
  'kv_buffer_device',
  'kv_buffer_size',
  'kv_role',
  'kv_rank',
  'kv_parallel_size',
  'kv_ip',
  'kv_port',
  'kv_connector_extra_config',
  'kv_connector_module_path',
  'enable_permute_local_kv',
  'kv_load_failure_policy',
]);

/** One warning line per key of `kvTransferConfig` that vLLM's `KVTransferConfig` has no field for. */
export function unknownKvTransferKeys(kvTransferConfig: Record<string, unknown>, path: string): string[] {
  return Object.keys(kvTransferConfig)
    .filter((key) => !VLLM_KV_TRANSFER_FIELDS.has(key))
    .map((key) => `${path}.${key}: not a vLLM KVTransferConfig field (vLLM ignores it)`);
}
