import { randomUUID } from 'node:crypto';
import type { SimEngine } from './engine-profiles.js';
import type { BlockHashAlgo } from '../kv-hash/index.js';
import type { FaultConfig } from './faults.js';
import type { KvEventsLayout } from './kv-events-publisher.js';
import type { ReasoningParser } from './reasoning.js';

export type { SimEngine };
export type SimRole = 'prefill' | 'decode' | 'union';

/** Every simulator setting; `motor sim` flags map 1:1 onto these (docs/cli.md, "motor sim"). */
export interface SimOptions {
  host: string;
  port: number;
  /** Host put into kv_transfer_params.remote_host / metaserver bodies (default: `host`, or 127.0.0.1 for wildcard). */
  advertiseHost: string | null;
  model: string;
  engine: SimEngine;
  /** Release family imitated (engine-profiles.ts); null = the engine's newest. */
  engineVersion: string | null;
  role: SimRole;
  kvConnector: string | null;
  engineId: string;
  // timing model
  timeScale: number;
  prefillOverheadMs: number;
  prefillMsPerToken: number;
  itlMs: number;
  loadSlowdown: number;
  maxNumSeqs: number;
  /** vLLM `--max-num-batched-tokens`: tokens per engine step, decodes first, then prefill chunks (step-budget.ts). */
  maxNumBatchedTokens: number;
  /** vLLM `--enable-chunked-prefill` (V1 default on): off, a prompt larger than the step's budget left waits. */
  enableChunkedPrefill: boolean;
  /** vLLM `--long-prefill-token-threshold`: cap on one request's prefill tokens per step; 0 = off. */
  longPrefillTokenThreshold: number;
  maxModelLen: number;
  defaultMaxTokens: number;
  /** The n-th output token of every request is EOS (finish_reason stop), honouring min_tokens; 0 = off. */
  eosAt: number;
  /** vLLM / SGLang `--reasoning-parser`: chat answers begin with reasoning text (reasoning.ts); null = off. */
  reasoningParser: ReasoningParser | null;
  // KV / prefix cache
  blockSize: number;
  kvBlocks: number;
  kvTransferMsPerBlock: number;
  /** Hold of unread handoff KV; null = the profile's default (480 s abort timeout, 30 s newest NIXL lease). */
  kvLeaseMs: number | null;
  kvWaitMs: number;
  /** NIXL push decode: how long its registration waits for the prefill's write; null = the profile's. */
  pushRegistrationTimeoutMs: number | null;
  bootstrapTimeoutMs: number;
  /** SGLang prefill: port of its own bootstrap server (0 = any free port); also what `bootstrap_port: null` means. */
  bootstrapPort: number;
  /** The model's tokenizer directory: tokenise and hash blocks the vLLM way (vllm-prompt.ts); null = own. */
  tokenizer: string | null;
  /** vLLM `--prefix-caching-hash-algo` (with `tokenizer`). */
  prefixCachingHashAlgo: BlockHashAlgo;
  /** The engine's PYTHONHASHSEED (with `tokenizer`). */
  hashSeed: string;
  // KV cache events (kv-events-publisher.ts)
  /** Bind a vLLM-format KV event publisher here (`tcp://host:port`, port `*` = any); null = off. */
  kvEventsEndpoint: string | null;
  /** Its replay (ROUTER) endpoint; null = none. */
  kvEventsReplayEndpoint: string | null;
  kvEventsTopic: string;
  kvEventsLayout: KvEventsLayout;
  /** Batches kept for replay (vLLM `buffer_steps`). */
  kvEventsBufferSteps: number;
  // engine auth (src/simulator/auth.ts)
  /** `--api-key`: vLLM checks it on `/v1*`, SGLang on every route but health/ready/metrics. */
  apiKey: string | null;
  /** SGLang `--admin-api-key`: required instead of the api key on ADMIN_OPTIONAL routes (`/abort_request`). */
  adminApiKey: string | null;
  // limits & debug
  maxBodyBytes: number;
  recordMax: number;
  ledgerMax: number;
  faults: Partial<FaultConfig>;
}

/**
 * Defaults resemble a 7B model on one A100-class GPU: ~10k prompt tokens/s prefill (0.1 ms/token)
 * plus 10 ms fixed overhead per step carrying prefill, at most 2048 tokens per step, 15 ms per
 * decode step (~65 tokens/s per sequence), 256 sequences per batch, ~100k tokens of KV (6144 blocks × 16), and 0.3 ms per 16-token block over RDMA.
 */
export function defaultSimOptions(): SimOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    advertiseHost: null,
    model: 'motor-sim-7b',
    engine: 'vllm',
    engineVersion: null,
    role: 'union',
    kvConnector: null,
    engineId: randomUUID(),
    timeScale: 1,
    prefillOverheadMs: 10,
    prefillMsPerToken: 0.1,
    itlMs: 15,
    loadSlowdown: 0.002,
    maxNumSeqs: 256,
    // vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py): the OpenAI server's defaults on a
    // GPU under 70 GiB or an A100 — 2048 batched tokens, 256 sequences; chunked prefill on
    // (SchedulerConfig.enable_chunked_prefill), long_prefill_token_threshold 0 (off).
    maxNumBatchedTokens: 2048,
    enableChunkedPrefill: true,
    longPrefillTokenThreshold: 0,
    maxModelLen: 32768,
    defaultMaxTokens: 16,
    eosAt: 0,
    reasoningParser: null,
    blockSize: 16,
    kvBlocks: 6144,
    kvTransferMsPerBlock: 0.3,
    kvLeaseMs: null,
    kvWaitMs: 30_000,
    pushRegistrationTimeoutMs: null,
    bootstrapTimeoutMs: 30_000,
    // SGLang ServerArgs.disaggregation_bootstrap_port default (python/sglang/srt/server_args.py).
    bootstrapPort: 8998,
    tokenizer: null,
    prefixCachingHashAlgo: 'sha256',
    hashSeed: '0',
    kvEventsEndpoint: null,
    kvEventsReplayEndpoint: null,
    kvEventsTopic: '',
    kvEventsLayout: 'map',
    // vllm/config/kv_events.py KVEventsConfig.buffer_steps default.
    kvEventsBufferSteps: 10_000,
    apiKey: null,
    adminApiKey: null,
    maxBodyBytes: 4 * 1024 * 1024,
    recordMax: 1000,
    ledgerMax: 1000,
    faults: {},
  };
}
