import type { ServerResponse } from 'node:http';
import type { Flow } from './flow.js';
import type { LedgerEntry } from './ledger.js';
import type { GenRequest } from './request-body.js';

/** One generation request on its way through the simulated engine. */
export interface Run {
  /** Base id: X-Request-Id (vLLM) / rid (SGLang), else body request_id, else random. */
  id: string;
  /** vLLM's external request id (`chatcmpl-<id>`, `cmpl-<id>-0`); SGLang: `id`. */
  externalId: string;
  /** The engine-internal id (vLLM ≥ 0.14: external + `-<8 hex>`), e.g. remote_request_id. */
  internalId: string;
  g: GenRequest;
  flow: Flow;
  entry: LedgerEntry;
  signal: AbortSignal;
  res: ServerResponse;
  startedAt: number;
  /** SSE headers sent (the stream is committed). */
  committed: boolean;
  emitted: number;
  dieAfter: number;
  recomputeAfter: number;
  slowFactor: number;
  hangMs: number;
  /** Fault: recompute the prompt although remote KV was received. */
  ignoreRemoteKv: boolean;
  /** Fault: keys left out of the handoff prefill's kv_transfer_params. */
  dropKvParams: readonly string[];
}
