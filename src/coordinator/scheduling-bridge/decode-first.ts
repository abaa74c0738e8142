import { CACHE_AWARE_SCORERS, type DecodeFirstConfig } from '../../config/decode-first-section.js';
import type { SchedulingRequest } from '../../scheduling/index.js';
import type { Instance } from '../fleet/instance-source.js';
import type { SchedulingAdapter, Selection } from './scheduling-adapter.js';

/**
 * Whether a decode instance's engine computes a whole request by itself when it is sent a plain one
 * (no `kv_transfer_params`, no bootstrap fields) — the `single` leg of decode-first and of the
 * `fallback-decode-only` retry. The one home of this rule on the coordinator side (the engine proxy's
 * `rolesAccepted` in engine-proxy/envelope.ts says the same to its callers).
 *
 * - vLLM: the connector acts only on a request's `kv_transfer_params`; without them
 *   `get_num_new_matched_tokens` returns `(0, False)` and `request_finished` `(False, None)`, so the
 *   scheduler serves the prompt from the local prefix cache and computes the rest, whatever the
 *   `kv_role` (VL `vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
 *   `NixlConnectorScheduler`, index 002a1057, NIXL connector v2).
 * - vllm-ascend layer-wise decode (`MooncakeLayerwiseConnector`, kv_consumer): the same guard on
 *   `do_remote_prefill`; only with it does `update_state_after_alloc` call the metaserver (VA
 *   `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_layerwise_connector.py`,
 *   `MooncakeLayerwiseConnectorScheduler`, index 016aa37d). There the decode leg is already the first
 *   leg, and the prefill it triggers transfers only past the decode's own cached tokens
 *   (`remote_cached_tokens`); "skipping the prefill" means no `do_remote_prefill`/`metaserver`, so no
 *   prefill instance computes or pushes anything.
 * - SGLang `--disaggregation-mode decode`: no. `DecodePreallocQueue.add` gives every request a KV
 *   receiver and waits for its bootstrap peer (only the warm-up's fake bootstrap host skips it); a
 *   decode server never prefills a prompt itself (SG `python/sglang/srt/disaggregation/decode.py`,
 *   index 0035ca42).
 */
export function decodeRunsWholeRequests(instance: Pick<Instance, 'engine'>): boolean {
  return instance.engine === 'vllm';
}

/** `cached`, `short`: decode-first taken (by which rule); `prefill`: both rules missed; `unsupported`: engine. */
export type DecodeFirstOutcome = 'cached' | 'short' | 'prefill' | 'unsupported';
/** Where the decode instance's cached tokens came from: its KV events, a decode scorer's estimate, nothing. */
export type PredictionSource = 'precise' | 'approximate' | 'none';

export interface DecodePrediction {
  readonly source: PredictionSource;
  readonly promptTokens: number;
  readonly cachedTokens: number;
}

/** The rule: the thresholds of `config` applied to one prediction. */
export function decodeFirstOutcome(
  config: Pick<DecodeFirstConfig, 'minCachedFraction' | 'maxUncachedTokens'>,
  supported: boolean,
  { promptTokens, cachedTokens }: DecodePrediction,
): DecodeFirstOutcome {
  if (!supported) return 'unsupported';
  const cached = Math.min(Math.max(0, cachedTokens), promptTokens);
  if (cached > 0 && cached >= config.minCachedFraction * promptTokens) return 'cached';
  return promptTokens - cached <= config.maxUncachedTokens ? 'short' : 'prefill';
}

/**
 * What is known of the prompt tokens `decodeId` holds: the engines' KV events (`precise-prefix`,
 * kv-prediction.ts) when that instance is indexed; else the estimate of a cache-aware scorer on the
 * decode profile (`approximate`: routed history, which records each pair's decode); else nothing.
 */
export function decodePrediction(
  request: SchedulingRequest,
  decodeId: string,
  scorerEstimate: number | undefined,
  scorerOnDecode: boolean,
): DecodePrediction {
  const promptTokens = request.kvPrediction?.promptTokens ?? request.promptTokens;
  const precise = request.kvPrediction?.cachedTokens.get(decodeId);
  if (precise !== undefined) return { source: 'precise', promptTokens, cachedTokens: precise };
  if (scorerOnDecode) return { source: 'approximate', promptTokens, cachedTokens: scorerEstimate ?? 0 };
  return { source: 'none', promptTokens, cachedTokens: 0 };
}

/**
 * Decode-first conditional disaggregation (issue 17 item 5), applied to each attempt's selection in one
 * place (Dispatcher.nextAttempt): a P/D pair whose decode instance holds most of the prompt, or would
 * compute only a short rest, becomes one plain `single` leg on that decode instance. The prefill pick
 * is given back (its breaker probe slot; the decode's load reservation is released, as the single leg
 * counts its own load). The answer is relayed like any single flow: stream or not, usage as the
 * engine reports it (its real `cached_tokens`), migration as for union instances.
 */
export class DecodeFirst {
  private readonly scorerOnDecode: boolean;

  constructor(
    private readonly config: DecodeFirstConfig,
    decodeScorers: readonly string[],
    private readonly scheduling: Pick<SchedulingAdapter, 'unused'>,
    private readonly count: (outcome: DecodeFirstOutcome, source: PredictionSource) => void = () => {},
  ) {
    this.scorerOnDecode = decodeScorers.some((type) => CACHE_AWARE_SCORERS.includes(type));
  }

  /** The selection to run: `selection` itself, or a single leg on its pair's decode instance. */
  apply(selection: Selection, request: SchedulingRequest): Selection {
    const { route } = selection;
    if (route.kind !== 'pd') return selection;
    const { decode, prefill } = route;
    const prediction = decodePrediction(
      request,
      decode.id,
      selection.decodeCachedPromptTokens,
      this.scorerOnDecode,
    );
    const outcome = decodeFirstOutcome(this.config, decodeRunsWholeRequests(decode), prediction);
    this.count(outcome, prediction.source);
    if (outcome === 'prefill' || outcome === 'unsupported') return selection;
    selection.reservation?.release();
    this.scheduling.unused(prefill);
    // the prompt's blocks are now expected on the decode, not on the prefill (kv-inflight.ts)
    request.kvPrediction?.release?.();
    request.kvPrediction?.routed?.(decode.id);
    return {
      route: { kind: 'single', instance: decode, degraded: false },
      cachedPromptTokens: prediction.cachedTokens,
      picked: [decode],
      reservation: null,
    };
  }
}
