import { MotorError } from '../../../common/motor-error.js';
import type { RequestObserver } from '../../../observability/dispatch-observer.js';
import type { ClientRequest } from '../../internal-request/client-request.js';
import { continuationBody, staticRefusal } from './continuation-body.js';
import { AnswerFold } from '../relay/assembled-answer.js';
import { MAX_RECORDED_BYTES, SentRecord, type SentLog } from './sent-so-far.js';
import { StreamSeam, stopStrings } from './stream-seam.js';

/**
 * In-flight migration (issue 16, docs/migration.md): when the decode (or single) leg of a committed
 * stream fails in a way a new attempt can fix, the dispatcher starts one more attempt whose prompt is
 * the original prompt plus everything the client already has, and its stream continues the same
 * response through a `StreamSeam`. One per request; bounded by `migration.maxPerRequest`.
 */
export class Migration {
  /** What the client has received (kept only while the request is migratable). */
  readonly sent: SentLog;
  /** An assembled answer's fold (`assembles`): it is also `sent`. Null for a stream or a JSON leg. */
  readonly answer: AnswerFold | null;
  /** Migrations started so far. */
  count = 0;
  /** The next attempt's body (null: the client's own). */
  body: Record<string, unknown> | null = null;
  /** The current continuation's seam (null: the first attempt). */
  seam: StreamSeam | null = null;
  /**
   * A non-stream request whose decode (or single) legs run as streams (`migration.nonStreamLegs`):
   * Motor assembles the client's JSON answer (assembled-relay.ts), and a leg failing mid-answer is
   * continued like a stream.
   */
  readonly assembles: boolean;
  /** Output of the answer reached Motor's relay (a stream's client, or an assembled answer's record). */
  started = false;
  /** The body continuations are built from: the client's, or its streamed form (`assembles`). */
  private readonly base: Record<string, unknown>;
  /** Why this request can never be migrated (null: it can), decided once. */
  private readonly refusal: string | null;
  private failedAt = 0;

  constructor(
    private readonly client: ClientRequest,
    private readonly max: number,
    private readonly obs: RequestObserver,
    nonStreamLegs: 'stream' | 'json' = 'json',
  ) {
    const refusal = max <= 0 ? 'off' : staticRefusal(client.kind, client.body);
    this.assembles = !client.stream && refusal === null && nonStreamLegs === 'stream';
    this.refusal = client.stream || this.assembles ? refusal : 'off';
    this.base = this.assembles ? streamedBody(client.body) : client.body;
    // an assembled answer folds its frames as they come (what its JSON needs, bounded frame bytes)
    this.answer = this.assembles ? new AnswerFold(client.kind) : null;
    this.sent = this.answer ?? new SentRecord(MAX_RECORDED_BYTES);
  }

  /** The body of the next attempt's legs. */
  get legBody(): Record<string, unknown> {
    return this.body ?? this.base;
  }

  /** Whether committed stream bytes should be kept (a later migration would read them). */
  get recording(): boolean {
    return this.refusal === null && !this.sent.overflow;
  }

  /**
   * After commit, before the error frame: whether the dispatcher should decide about a migration
   * instead (a failure of the leg a new attempt can fix; never the client's or the deadline's).
   */
  wants(err: MotorError): boolean {
    if (this.refusal === 'off') return false;
    return MIGRATABLE.has(err.code) && (err.retryable || err.code === 'idle_timeout');
  }

  /**
   * The dispatcher's decision after `failure` ended a committed attempt: prepares the next attempt's
   * body and seam (null), or returns the error the client gets (the failure, with why it was not
   * migrated).
   */
  begin(failure: MotorError): MotorError | null {
    const reason = failure.code;
    const refuse = (why: string, outcome: string): MotorError => {
      this.obs.migration?.(reason, outcome);
      if (why === 'off') return failure;
      const note = `not migrated: ${why}`;
      return new MotorError(failure.code, `${failure.message}; ${note}`, {
        retryable: false,
        instanceId: failure.instanceId,
        clientNote: note,
      });
    };
    if (!this.wants(failure) || this.refusal === 'off') return failure;
    if (this.refusal !== null) return refuse(`the request has ${this.refusal}`, 'refused');
    if (this.sent.overflow) return refuse('the answer is too long to keep', 'refused');
    if (this.count >= this.max)
      return refuse(`${this.count} migration(s) already (migration.maxPerRequest)`, 'exhausted');
    const sent = this.sent.summary();
    if (sent.finished) return refuse('the answer was already complete', 'refused');
    const next = continuationBody(this.client.kind, this.base, sent);
    if (next.kind === 'refused') return refuse(`the answer has ${next.reason}`, 'refused');
    if (next.kind === 'complete') return refuse('max_tokens was already reached', 'refused');
    this.count++;
    this.body = next.body;
    this.seam = new StreamSeam(sent, stopStrings(this.client.body));
    this.failedAt = performance.now();
    this.seam.onFirstOutput = () => this.resumed(reason);
    this.obs.migration?.(reason, 'started');
    return null;
  }

  private resumed(reason: string): void {
    this.obs.migration?.(reason, 'resumed');
    this.obs.migrationResumed?.((performance.now() - this.failedAt) / 1000);
  }
}

/** Failures of a committed leg a continuation elsewhere can fix (engine gone, stalled, preempted). */
const MIGRATABLE = new Set<string>([
  'connection_error',
  'engine_error',
  'engine_unavailable',
  'instance_withdrawn',
  'protocol_error',
  'decode_recomputed',
  'first_token_timeout',
  'idle_timeout',
]);

/**
 * A non-stream body as a streamed leg: `stream: true` with the usage frame (vLLM and SGLang send
 * `usage` in a stream only with `stream_options.include_usage`), so the assembled answer has it.
 */
export function streamedBody(body: Record<string, unknown>): Record<string, unknown> {
  return { ...body, stream: true, stream_options: { include_usage: true } };
}
