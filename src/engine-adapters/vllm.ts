import { KV_TRANSFER_PARAMS_KEY, MOTOR_PREFILL_RESULT_KEY, matchesDispatch } from '../protocol/index.js';
import { adapterError, resolveLeg, usageOf, withoutMotorFields } from './leg-kind.js';
import type {
  AbortPlan,
  AdapterResult,
  BuildEngineRequestInput,
  EngineAdapter,
  EngineRequest,
  LegKind,
  MetaserverKvFields,
  ParsedPrefill,
} from './types.js';

/** Client keys that steer vLLM's KV connector; only an envelope may set them. */
const VLLM_RESERVED_FIELDS = [KV_TRANSFER_PARAMS_KEY] as const;

/** Path on the prefill side (proxy or coordinator) that a trigger decode engine calls. */
export const METASERVER_PATH = '/v1/metaserver';

/** `<base>/v1/metaserver` without a doubled slash. */
export function metaserverUrlFor(prefillBaseUrl: string): string {
  return prefillBaseUrl.replace(/\/+$/, '') + METASERVER_PATH;
}

/** kv_transfer_params of a handoff prefill leg: compute, hold the blocks, return their handle. */
export const HANDOFF_PREFILL_KV = Object.freeze({ do_remote_decode: true, do_remote_prefill: false });

/**
 * kv_transfer_params of the real prefill run by the trigger flow: the decode engine's KV fields
 * (so the prefill pushes into its blocks) plus `do_remote_decode:true, do_remote_prefill:false`.
 * Extra keys the decode's connector sent are kept; ours win on conflict.
 */
export function triggerPrefillKvParams(
  fields: MetaserverKvFields,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return { ...extra, ...fields, do_remote_decode: true, do_remote_prefill: false };
}

function triggerDecodeKv(metaserver: string): Record<string, unknown> {
  return { do_remote_decode: false, do_remote_prefill: true, metaserver };
}

/**
 * vLLM (NIXL / Mooncake V1 handoff, Mooncake layer-wise trigger). The engine request id goes into
 * `request_id` (and the `X-Request-Id` header, which vLLM prefers).
 */
export const vllmAdapter: EngineAdapter = {
  kind: 'vllm',
  requestIdField: 'request_id',
  reservedFields: VLLM_RESERVED_FIELDS,

  legFor(dispatch) {
    return resolveLeg(dispatch, 'trigger', true, 'vLLM');
  },

  buildEngineRequest(leg: LegKind, input: BuildEngineRequestInput): AdapterResult<EngineRequest> {
    const { dispatch } = input;
    const body = withoutMotorFields(input.body);
    body.request_id = dispatch.engine_request_id;
    switch (leg) {
      case 'single':
        delete body.kv_transfer_params;
        break;
      case 'handoff_prefill':
        body.kv_transfer_params = { ...HANDOFF_PREFILL_KV };
        // vLLM suppresses EOS and stop strings while output < min_tokens, so the one-token prefill
        // ends length-capped — the only status for which NixlConnector (2026-01) and every
        // vllm-ascend Mooncake connector return kv_transfer_params (VL nixl_connector.py and VA
        // mooncake_connector.py `request_finished`). The vllm-ascend proxies do the same (VA
        // load_balance_proxy_server_example.py `build_prefill_request`, main; v0.13.0/v0.18.0
        // `send_request_to_service`). The prefill's token is discarded (the decode samples its own
        // first token), so the client's answer does not change. The coordinator's leg body stays
        // free of the client's min_tokens (conformance 18): this is the engine request only.
        body.min_tokens = 1;
        break;
      case 'handoff_decode': {
        const result = input.prefillResult;
        if (!result) {
          return adapterError(
            400,
            `a handoff decode needs ${MOTOR_PREFILL_RESULT_KEY} from the prefill leg`,
            MOTOR_PREFILL_RESULT_KEY,
          );
        }
        if (!matchesDispatch(result, dispatch)) {
          return adapterError(
            400,
            `${MOTOR_PREFILL_RESULT_KEY} belongs to another attempt (root_request_id, pair_id and attempt_seq ` +
              'must match _motor_dispatch)',
            MOTOR_PREFILL_RESULT_KEY,
          );
        }
        if (result.status === 'prepared' || result.handoff_mode !== 'handoff') {
          return adapterError(
            400,
            `${MOTOR_PREFILL_RESULT_KEY} must be status 'completed' or 'skipped' with handoff_mode 'handoff' ` +
              `for a handoff decode, got ${result.status}/${result.handoff_mode}`,
            `${MOTOR_PREFILL_RESULT_KEY}.status`,
          );
        }
        // skipped: the prefill handed over no KV; a plain decode recomputes the prompt, as both
        // reference proxies do on null params (VL toy_proxy_server.py; VA LBP, all tags).
        if (result.status === 'skipped') delete body.kv_transfer_params;
        else body.kv_transfer_params = result.payload; // verbatim
        break;
      }
      case 'trigger_prefill': {
        if (!input.triggerKv) {
          return adapterError(400, 'a trigger prefill runs only with the decode engine KV fields', null);
        }
        body.kv_transfer_params = triggerPrefillKvParams(input.triggerKv);
        break;
      }
      case 'trigger_decode': {
        const prefillUrl = dispatch.endpoints.prefill?.url;
        const metaserver = input.metaserverUrl ?? (prefillUrl ? metaserverUrlFor(prefillUrl) : null);
        if (!metaserver) {
          return adapterError(
            400,
            'a trigger decode needs _motor_dispatch.endpoints.prefill.url (the metaserver host)',
            '_motor_dispatch.endpoints.prefill',
          );
        }
        body.kv_transfer_params = triggerDecodeKv(metaserver);
        break;
      }
      default:
        return adapterError(400, `vLLM engines do not run ${leg} legs`, '_motor_dispatch.dispatch_mode');
    }
    return { ok: true, body, headers: { 'x-request-id': dispatch.engine_request_id } };
  },

  parsePrefillResponse(leg: LegKind, responseBody: unknown): AdapterResult<ParsedPrefill> {
    if (leg !== 'handoff_prefill' && leg !== 'trigger_prefill') {
      return adapterError(400, `no prefill result for a ${leg} leg`, null);
    }
    const kv =
      typeof responseBody === 'object' && responseBody !== null
        ? (responseBody as { kv_transfer_params?: unknown }).kv_transfer_params
        : undefined;
    const usage = usageOf(responseBody);
    if (leg === 'handoff_prefill') {
      if (typeof responseBody !== 'object' || responseBody === null || Array.isArray(responseBody)) {
        return adapterError(
          502,
          'the prefill engine answered without kv_transfer_params: its answer is not a JSON object',
          null,
        );
      }
      // null (or absent): the connector kept no blocks for a decode — NixlConnector 2026-01 and the
      // vllm-ascend Mooncake connectors when the one token ended by EOS/stop (VL nixl_connector.py,
      // VA mooncake_connector.py / mooncake_hybrid_connector.py `request_finished`). Not a fault of
      // the engine: the decode runs without KV params (README facts 8, 10, 11).
      if (kv === null || kv === undefined) return { ok: true, payload: {}, usage, skipped: true };
      if (typeof kv !== 'object' || Array.isArray(kv)) {
        return adapterError(
          502,
          'the prefill engine answered kv_transfer_params that is not an object',
          null,
        );
      }
    }
    const payload = typeof kv === 'object' && kv !== null ? (kv as Record<string, unknown>) : {};
    return { ok: true, payload, usage };
  },

  abortPlan(): AbortPlan {
    // vLLM aborts a request when its HTTP connection closes; there is no abort endpoint.
    return { closeConnection: true, request: null };
  },
};
