import type { ServerResponse } from 'node:http';
import type { Flow } from './flow.js';
import type { LedgerEntry } from './ledger.js';
import type { GenRequest } from './request-body.js';

/** One generation request on its way through the simulated engine. */
export interface Run {
  id: string;
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
  slowFactor: number;
  hangMs: number;
}
