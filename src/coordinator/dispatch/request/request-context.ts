import type { RequestObserver } from '../../../observability/dispatch-observer.js';
import type { SchedulingRequest } from '../../../scheduling/index.js';
import type { ClientRequest } from '../../internal-request/client-request.js';
import type { ClientSink } from './client-sink.js';
import type { Migration } from '../migration/migration.js';
import type { RequestCancellation } from './request-cancellation.js';
import type { ResponseRewrite } from '../relay/sse-relay.js';
import type { ClientErrorFilter } from '../../client-errors.js';

/** One client request as its attempts see it. */
export interface RequestContext {
  readonly rootRequestId: string;
  readonly client: ClientRequest;
  /** The engine route every leg posts to (`ENGINE_PATHS` of the request's kind). */
  readonly path: string;
  readonly sink: ClientSink;
  readonly cancellation: RequestCancellation;
  readonly obs: RequestObserver;
  /** Built once per client request (rendered prompt). */
  readonly schedulingRequest: SchedulingRequest;
  /** What the relays change in the engine's answer; `cachedTokens` comes from the prefill leg. */
  readonly rewrite: ResponseRewrite;
  /** `x-motor-hops` of every leg (hop-header.ts); absent = this coordinator alone. */
  readonly hops?: string;
  /** In-flight migration after commit (migration.ts): what was sent, the continuation body and seam. */
  readonly migration: Migration;
  /** Every failure the client sees passes through it: no instance text unless configured (client-errors.ts). */
  readonly clientError: ClientErrorFilter;
}
