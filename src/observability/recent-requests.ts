/** One leg of a finished request, times in ms from the request's start. */
export interface LegSummary {
  attempt: number;
  role: 'prefill' | 'decode' | 'single';
  instance: string;
  startMs: number;
  firstByteMs: number | null;
  endMs: number | null;
  error: string | null;
  /** 0: a leg of the request's own answer; k: of the continuation after its k-th migration. */
  migration: number;
}

/** What the dashboard shows about one finished request (no prompt or completion content). */
export interface RequestSummary {
  id: string;
  route: string;
  model: string;
  stream: boolean;
  status: number;
  outcome: string;
  plan: string;
  attempts: number;
  startedAt: number;
  endedAt: number;
  durationMs: number;
  ttftMs: number | null;
  frames: number;
  /** In-flight migrations started (docs/migration.md); their legs carry `migration` > 0. */
  migrations: number;
  legs: LegSummary[];
}

export interface WindowStats {
  windowSeconds: number;
  requests: number;
  requestsPerSecond: number;
  /** Requests that failed on Motor's or an engine's side: a client hanging up is not one. */
  errors: number;
  /** Requests the client hung up on before the answer ended. */
  clientDisconnected: number;
  ttftMs: Percentiles | null;
  durationMs: Percentiles | null;
  /** Requests finished per second, oldest first (one entry per second of the window). */
  perSecond: number[];
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
}

function percentiles(values: number[]): Percentiles | null {
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const at = (q: number): number => values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}

const OK = 0;
const FAILED = 1;
const CLIENT_GONE = 2;

/** A client that hangs up ended its own request: counted apart, so the error tile shows Motor's failures. */
function endingOf(outcome: string): typeof OK | typeof FAILED | typeof CLIENT_GONE {
  if (outcome === 'ok') return OK;
  return outcome === 'client_disconnect' ? CLIENT_GONE : FAILED;
}

/**
 * Two bounded ring buffers: the last `capacity` request summaries (leg timelines for the dashboard)
 * and compact samples of the last `sampleCapacity` requests for rate and latency percentiles over a
 * sliding window. Memory is fixed; adding is O(1); reading is O(capacity).
 */
export class RecentRequests {
  private readonly items: (RequestSummary | undefined)[];
  private next = 0;
  private readonly endedAt: Float64Array;
  private readonly ttft: Float64Array;
  private readonly duration: Float64Array;
  /** Per sample: {@link OK}, {@link FAILED} or {@link CLIENT_GONE}. */
  private readonly failed: Uint8Array;
  private sampleNext = 0;
  private sampleCount = 0;
  total = 0;
  errorsTotal = 0;
  clientDisconnectedTotal = 0;

  constructor(
    readonly capacity: number,
    readonly sampleCapacity = 4096,
  ) {
    this.items = new Array<RequestSummary | undefined>(Math.max(0, capacity));
    this.endedAt = new Float64Array(sampleCapacity);
    this.ttft = new Float64Array(sampleCapacity);
    this.duration = new Float64Array(sampleCapacity);
    this.failed = new Uint8Array(sampleCapacity);
  }

  add(s: RequestSummary): void {
    this.total++;
    const ending = endingOf(s.outcome);
    if (ending === FAILED) this.errorsTotal++;
    else if (ending === CLIENT_GONE) this.clientDisconnectedTotal++;
    if (this.capacity > 0) {
      this.items[this.next] = s;
      this.next = (this.next + 1) % this.capacity;
    }
    const i = this.sampleNext;
    this.endedAt[i] = s.endedAt;
    this.ttft[i] = s.ttftMs ?? -1;
    this.duration[i] = s.durationMs;
    this.failed[i] = ending;
    this.sampleNext = (i + 1) % this.sampleCapacity;
    if (this.sampleCount < this.sampleCapacity) this.sampleCount++;
  }

  /** Most recent first, at most `limit`. */
  list(limit = this.capacity): RequestSummary[] {
    const out: RequestSummary[] = [];
    for (let k = 1; k <= this.capacity && out.length < limit; k++) {
      const item = this.items[(this.next - k + this.capacity) % this.capacity];
      if (item === undefined) break;
      out.push(item);
    }
    return out;
  }

  window(nowMs: number, windowSeconds = 60): WindowStats {
    const from = nowMs - windowSeconds * 1000;
    const ttft: number[] = [];
    const duration: number[] = [];
    const perSecond = new Array<number>(windowSeconds).fill(0);
    let errors = 0;
    let clientDisconnected = 0;
    for (let k = 0; k < this.sampleCount; k++) {
      const t = this.endedAt[k]!;
      if (t <= from || t > nowMs) continue;
      duration.push(this.duration[k]!);
      if (this.ttft[k]! >= 0) ttft.push(this.ttft[k]!);
      if (this.failed[k] === FAILED) errors++;
      else if (this.failed[k] === CLIENT_GONE) clientDisconnected++;
      const bucket = windowSeconds - 1 - Math.floor((nowMs - t) / 1000);
      if (bucket >= 0) perSecond[bucket]!++;
    }
    return {
      windowSeconds,
      requests: duration.length,
      requestsPerSecond: duration.length / windowSeconds,
      errors,
      clientDisconnected,
      ttftMs: percentiles(ttft),
      durationMs: percentiles(duration),
      perSecond,
    };
  }
}
