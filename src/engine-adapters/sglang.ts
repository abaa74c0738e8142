import { bootstrapRoomFor, KV_STEERING_FIELDS } from '../protocol/index.js';
import { adapterError, resolveLeg, usageOf, withoutMotorFields } from './leg-kind.js';
import type {
  AbortPlan,
  AdapterResult,
  BuildEngineRequestInput,
  EngineAdapter,
  EngineRequest,
  LegKind,
  ParsedPrefill,
} from './types.js';

/** Client keys that steer SGLang's disaggregation (and vLLM's field too); only an envelope may set them. */
const SGLANG_RESERVED_FIELDS = KV_STEERING_FIELDS;

/**
 * SGLang's own default `--disaggregation-bootstrap-port` (sgl-project/sglang
 * python/sglang/srt/server_args.py `ServerArgs.disaggregation_bootstrap_port`, 2026 index versions;
 * fixtures README fact 16). The engine proxy learns the real one from `/server_info`.
 */
export const SGLANG_DEFAULT_BOOTSTRAP_PORT = 8998;

/**
 * How many bootstrap rooms a body occupies: SGLang turns one scalar `bootstrap_room` into `room + i`
 * for each of `prompts × n` requests (sgl-project/sglang python/sglang/srt/managers/io_struct.py
 * `GenerateReqInput` normalisation, `num = batch_size * parallel_sample_num`; the OpenAI routes build
 * that input from a `prompt` list and `n`). Both legs send the same body shape, so both compute it alike.
 */
export function bootstrapRoomSpan(body: Readonly<Record<string, unknown>>): number {
  const batch = body.prompt ?? body.text ?? body.input_ids;
  const batchPrompts =
    Array.isArray(batch) && batch.length > 0 && (typeof batch[0] === 'string' || Array.isArray(batch[0]))
      ? batch.length
      : 1;
  const sampling = body.sampling_params;
  const n =
    typeof body.n === 'number'
      ? body.n
      : typeof sampling === 'object' &&
          sampling !== null &&
          typeof (sampling as { n?: unknown }).n === 'number'
        ? (sampling as { n: number }).n
        : 1;
  return batchPrompts * Math.max(1, Math.floor(n));
}

/**
 * SGLang (bootstrap rendezvous). Both legs carry `bootstrap_host`/`bootstrap_port` of the prefill
 * engine and `bootstrap_room = bootstrapRoomFor(pair_id, attempt_seq)` (a bigint: serialise with
 * `stringifyWithBigInt` so the 63-bit room stays exact). The engine request id goes into `rid`.
 */
export const sglangAdapter: EngineAdapter = {
  kind: 'sglang',
  requestIdField: 'rid',
  reservedFields: SGLANG_RESERVED_FIELDS,

  legFor(dispatch) {
    return resolveLeg(dispatch, 'bootstrap', false, 'SGLang');
  },

  buildEngineRequest(leg: LegKind, input: BuildEngineRequestInput): AdapterResult<EngineRequest> {
    const { dispatch } = input;
    const body = withoutMotorFields(input.body);
    for (const key of SGLANG_RESERVED_FIELDS) delete body[key];
    body.rid = dispatch.engine_request_id;
    if (leg === 'bootstrap_prefill' || leg === 'bootstrap_decode') {
      const address = input.bootstrap;
      if (!address) {
        return adapterError(
          400,
          "a bootstrap leg needs the prefill engine's bootstrap host and port",
          '_motor_dispatch.endpoints.prefill',
        );
      }
      body.bootstrap_host = address.host;
      body.bootstrap_port = address.port;
      body.bootstrap_room = bootstrapRoomFor(dispatch.pair_id, dispatch.attempt_seq, bootstrapRoomSpan(body));
    } else if (leg !== 'single') {
      return adapterError(400, `SGLang engines do not run ${leg} legs`, '_motor_dispatch.dispatch_mode');
    }
    return { ok: true, body, headers: { 'x-request-id': dispatch.engine_request_id } };
  },

  parsePrefillResponse(leg: LegKind, responseBody: unknown): AdapterResult<ParsedPrefill> {
    if (leg !== 'bootstrap_prefill') return adapterError(400, `no prefill result for a ${leg} leg`, null);
    // The KV went to the decode through the room; nothing to hand over but the usage.
    return { ok: true, payload: {}, usage: usageOf(responseBody) };
  },

  abortPlan(engineRequestId: string): AbortPlan {
    return {
      closeConnection: true,
      request: { method: 'POST', path: '/abort_request', body: { rid: engineRequestId } },
    };
  },
};
