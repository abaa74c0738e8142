import { MotorError } from '../../common/motor-error.js';

/** One stored response: what `GET /v1/responses/{id}` returns and what a later turn replays. */
export interface StoredResponse {
  readonly id: string;
  /** Who may read, chain or delete it (a hash of the API key or tenant header, never the key). */
  readonly tenant: string;
  readonly previousId: string | null;
  /** This turn's input items, as `GET /v1/responses/{id}/input_items` lists them. */
  readonly input: readonly Record<string, unknown>[];
  /** The Response object (its `output` is what the next turn replays). */
  readonly response: Record<string, unknown>;
}

/**
 * Where responses outlive their request (in the coordinator, never on an engine: a chain's turns may
 * run on different P/D pairs). `get` and `delete` answer only the tenant that stored the record —
 * another tenant sees nothing, as for an unknown id. Errors are `MotorError`s: `store_unavailable`
 * (503) when the backend cannot be reached, `invalid_request` when a record exceeds the byte limit.
 */
export interface ResponseStore {
  readonly kind: 'memory' | 'redis';
  /** Whether a write can be expected to succeed now (no round trip): `store: true` is refused when not. */
  available(): boolean;
  /** Stores the record whole (one write: nothing half-written), replacing none (ids are unique). */
  put(record: StoredResponse): Promise<void>;
  get(id: string, tenant: string): Promise<StoredResponse | null>;
  /** true when the tenant's record existed and is gone. */
  delete(id: string, tenant: string): Promise<boolean>;
  close(): Promise<void>;
}

/** What the store reports (observability implements it as metrics). */
export interface ResponseStoreObserver {
  lookup(outcome: 'hit' | 'miss'): void;
  stored(bytes: number): void;
  error(op: 'put' | 'get' | 'delete'): void;
}

export const noopStoreObserver: ResponseStoreObserver = { lookup() {}, stored() {}, error() {} };

export interface ResponseStoreLimits {
  /** A record's JSON size limit (`responses.maxStoredBytes`). */
  readonly maxRecordBytes: number;
  /** Seconds a record lives (`responses.ttlSeconds`). */
  readonly ttlSeconds: number;
}

/** The record as stored, or the refusal when it is larger than allowed. */
export function serializeRecord(record: StoredResponse, limits: ResponseStoreLimits): string {
  const json = JSON.stringify(record);
  const bytes = Buffer.byteLength(json);
  if (bytes > limits.maxRecordBytes)
    throw new MotorError(
      'invalid_request',
      `the response is ${bytes} bytes stored, more than responses.maxStoredBytes (${limits.maxRecordBytes}); send store: false`,
      { param: 'store' },
    );
  return json;
}

export function parseRecord(json: string): StoredResponse | null {
  try {
    return JSON.parse(json) as StoredResponse;
  } catch {
    return null;
  }
}
