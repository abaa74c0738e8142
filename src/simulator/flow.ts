import { RequestError, type GenRequest } from './request-body.js';
import type { SimEngine, SimRole } from './options.js';

/**
 * Which P/D flow a request takes on this instance, from its role, engine and kv fields.
 *
 * vLLM:   prefill + do_remote_decode              → handoff_prefill (hold blocks, return kv_transfer_params)
 *         prefill + do_remote_decode + remote_*   → trigger_prefill (push KV to the decode named by non-null remote_*;
 *                                                   the toy proxy's `remote_*: null` keys are a handoff prefill)
 *         decode  + do_remote_prefill + remote_*  → handoff_decode  (pull KV from remote_host:remote_port)
 *         decode  + do_remote_prefill + metaserver→ trigger_decode  (call the metaserver, wait for the push)
 * SGLang: prefill + bootstrap_*                   → bootstrap_prefill; decode + bootstrap_* → bootstrap_decode
 * Everything else (and every union request)       → plain. Mismatches with the role are 400s.
 */
export type Flow =
  | 'plain'
  | 'handoff_prefill'
  | 'handoff_decode'
  | 'trigger_prefill'
  | 'trigger_decode'
  | 'bootstrap_prefill'
  | 'bootstrap_decode';

export function classifyFlow(g: GenRequest, role: SimRole, engine: SimEngine): Flow {
  if (role === 'union') return 'plain';
  if (engine === 'sglang') {
    if (!g.bootstrap) return 'plain';
    return role === 'prefill' ? 'bootstrap_prefill' : 'bootstrap_decode';
  }
  const kv = g.kv;
  if (!kv) return 'plain';
  const remoteDecode = kv.do_remote_decode === true;
  const remotePrefill = kv.do_remote_prefill === true;
  if (role === 'prefill') {
    if (remotePrefill) {
      throw new RequestError(
        400,
        'kv_transfer_params.do_remote_prefill is not valid on a prefill instance',
        'kv_transfer_params',
      );
    }
    if (!remoteDecode) return 'plain';
    // vLLM's toy P/D proxy and vllm-ascend's proxy send remote_engine_id/block_ids/host/port: null
    // (VL tests/v1/kv_connector/nixl_integration/toy_proxy_server.py send_request_to_service), which
    // the connectors ignore. A stream:true prefill is served (streamed) like any request.
    return (kv.remote_host ?? null) !== null || (kv.remote_port ?? null) !== null
      ? 'trigger_prefill'
      : 'handoff_prefill';
  }
  if (remoteDecode) {
    throw new RequestError(
      400,
      'kv_transfer_params.do_remote_decode is not valid on a decode instance',
      'kv_transfer_params',
    );
  }
  if (!remotePrefill) return 'plain';
  return typeof kv.metaserver === 'string' ? 'trigger_decode' : 'handoff_decode';
}

export function requireField<T>(
  kv: Record<string, unknown>,
  key: string,
  check: (v: unknown) => v is T,
  what: string,
): T {
  const v = kv[key];
  if (!check(v))
    throw new RequestError(400, `kv_transfer_params.${key} must be ${what}`, 'kv_transfer_params');
  return v;
}

export const isString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
export const isPort = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v > 0 && v < 65536;
export const isIntArray = (v: unknown): v is number[] =>
  Array.isArray(v) && v.every((x) => Number.isInteger(x));
/** `remote_block_ids`: one flat list, or one list per KV-cache group (newest NIXL, vllm-ascend ≥ v0.17). */
export const isBlockIds = (v: unknown): v is number[] | number[][] =>
  isIntArray(v) || (Array.isArray(v) && v.every(isIntArray));
/** Block ids of every KV-cache group, in order. */
export const flatBlockIds = (v: number[] | number[][]): number[] =>
  (v as unknown[]).flatMap((x) => (Array.isArray(x) ? (x as number[]) : [x as number]));
