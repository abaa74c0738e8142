import type { DispatchPlan } from '../protocol/index.js';

/** Role an instance plays in P/D serving; `union` does both prefill and decode. */
export type InstanceRole = 'prefill' | 'decode' | 'union';

/** An engine instance as the scheduler sees it (the registry's view, read-only). */
export interface SchedulableInstance {
  readonly id: string;
  readonly role: InstanceRole;
  readonly url: string;
  /** Advertised plan names; non-plan strings are ignored (conformance 1). */
  readonly dispatch_capabilities: readonly string[];
  /** Relative capacity (default 1): load is divided by it, random/round-robin are weighted by it. */
  readonly weight?: number;
  /**
   * Engine kind (`vllm`, `sglang`): a pair is only ever formed within one kind, since a shared plan
   * name means different wire flows on different engines (`concurrent_engine_sync` is the layer-wise
   * trigger on vLLM, the bootstrap room on SGLang). Absent = pairs with any instance.
   */
  readonly engine?: string;
  /**
   * The KV connector moving the cache (vLLM `kv_transfer_config.kv_connector`, e.g. `NixlConnector`,
   * `MooncakeConnectorV1`): a pair is only formed within one connector, as both are `handoff` yet cannot
   * read each other's blocks. Absent (SGLang, registrations that do not say) = pairs with any instance.
   */
  readonly kvConnector?: string;
}

/** What the scheduler needs to know about one client request. Build it once per request. */
export interface SchedulingRequest {
  readonly model: string;
  /**
   * The rendered prompt (chat template applied, whole conversation), or the pieces whose concatenation
   * it is. Used when `promptTokenIds` is absent.
   */
  readonly promptText?: string | readonly string[];
  /** Token ids of the rendered prompt, if the gateway tokenized it; preferred for prefix hashing. */
  readonly promptTokenIds?: ArrayLike<number>;
  /** Estimated prompt length in tokens (e.g. `promptTokenIds.length`, or text length / 4). */
  readonly promptTokens: number;
  /** Session affinity key (e.g. the value of an `x-session-id` header). */
  readonly sessionKey?: string;
  /** Caller's API key (rate limiting; never logged). */
  readonly apiKey?: string;
  /** The `cache_salt` the engines get (tenant isolation): seeds the prefix hashes, so two tenants never share one. */
  readonly cacheSalt?: string;
  /**
   * What the engines' KV events predict (issue 17, `precise-prefix`): the prompt's length in the
   * model's own tokens, and per instance whose events are indexed and whose block hashes Motor can
   * compute, the prompt tokens it will serve from its prefix cache. Absent: nothing is known.
   */
  readonly kvPrediction?: KvPrediction;
}

export interface KvPrediction {
  readonly promptTokens: number;
  /** What the events say each instance holds now (what its engine will report, `motor doctor`). */
  readonly cachedTokens: ReadonlyMap<string, number>;
  /**
   * Routing only: per instance where it is more, the cached tokens once this coordinator's requests
   * routed there and not yet seen in its events are prefilled (events ∪ in flight).
   */
  readonly expectedCachedTokens?: ReadonlyMap<string, number>;
  /** The request was routed to `instanceId`: its blocks are expected there until events show them. */
  routed?(instanceId: string): void;
  /** The request failed or was cancelled: what it was expected to store is no longer expected. */
  release?(): void;
}

/** A P/D pair sharing `plan`. */
export interface PairDecision {
  readonly kind: 'pair';
  readonly plan: DispatchPlan;
  readonly prefill: SchedulableInstance;
  readonly decode: SchedulableInstance;
  /** Estimated prompt tokens already cached on the chosen prefill instance (0 if unknown). */
  readonly cachedPromptTokens: number;
  /** The same for the chosen decode instance, when a cache-aware scorer runs on decode (decode-first). */
  readonly decodeCachedPromptTokens?: number;
}

/** Why a single instance serves the whole request. */
export type SingleReason =
  /** Only union instances, or P/D impossible and fallback to union enabled. */
  | 'union'
  /** Only prefill instances usable; degraded single-instance dispatch enabled (conformance 15). */
  | 'degraded_prefill'
  /** Conditional disaggregation: a short prompt is cheaper on one instance. */
  | 'short_prompt'
  /** A request with no generation (embeddings, tokenize, score, ...): one instance of a chosen role. */
  | 'one_instance';

/** One instance runs prefill and decode (plan `single`). */
export interface SingleDecision {
  readonly kind: 'single';
  readonly instance: SchedulableInstance;
  readonly reason: SingleReason;
  readonly cachedPromptTokens: number;
}

export type SchedulingFailureCode =
  /** No instance of any usable role is registered. */
  | 'no_instances'
  /** Instances exist but every candidate was filtered out (open circuits, KV pressure, ...). */
  | 'no_available_instance'
  /** Prefill and decode instances exist but share no dispatch plan (conformance 14). */
  | 'no_compatible_pair';

/** Typed failure; the gateway renders it as 503. `message` names the missing capability. */
export interface SchedulingFailure {
  readonly kind: 'failure';
  readonly code: SchedulingFailureCode;
  readonly message: string;
  /** Plans one side offers that the other side lacks (for `no_compatible_pair`). */
  readonly missingCapabilities: readonly DispatchPlan[];
  /** Instances removed per filter type, summed over roles (e.g. `{ 'circuit-breaker': 2 }`). */
  readonly filtered: Readonly<Record<string, number>>;
}

export type SchedulingDecision = PairDecision | SingleDecision | SchedulingFailure;
