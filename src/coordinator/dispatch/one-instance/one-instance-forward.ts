import { clientErrorFilter, type ClientErrorFilter } from '../../client-errors.js';
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { MotorError } from '../../../common/motor-error.js';
import {
  noopDispatchObserver,
  routeSummary,
  type RequestObserver,
} from '../../../observability/dispatch-observer.js';
import type { SchedulingRequest } from '../../../scheduling/index.js';
import { backoffDelayMs } from '../attempt/backoff.js';
import type { DispatcherDeps } from '../attempt/dispatcher.js';
import { OpenAiPassThroughSink } from '../request/openai-pass-through-sink.js';
import type { RequestCancellation } from '../request/request-cancellation.js';
import { Leg } from '../transport/leg.js';
import { LegTransports } from '../transport/leg-transport.js';
import { HOP_HEADER } from '../../fleet/hop-header.js';
import type { Instance } from '../../fleet/instance-source.js';
import { readAll } from '../../fleet/upstream.js';

/** One request of a one-instance route, as the gateway read it. */
export interface OneInstanceRequest {
  readonly path: string;
  /** The client's body, forwarded byte for byte. */
  readonly bytes: Buffer;
  /** The model routed on ('' = any instance: the fleet names no model). */
  readonly model: string;
  readonly rootRequestId: string;
  readonly apiKey: string;
  /** The loop-guard header the leg carries (hop-header.ts `nextHops`). */
  readonly hops: string;
  readonly cancellation: RequestCancellation;
}

/**
 * Bytes per prompt token of the load estimate: the body is not tokenised (it passes through), and
 * about four bytes of English text make one BPE token, so the load tracker still sees a large batch
 * of documents as more work than a short query.
 */
const BYTES_PER_TOKEN = 4;

/**
 * Runs a request with no generation (embeddings, tokenize, score, …) as one leg on one instance: the
 * scheduler picks it among `dispatch.oneInstanceRoles` (load, breakers and the instance's claim as
 * for any leg), the client's bytes go to the same path unchanged, and the engine's answer comes back
 * byte for byte. Before the answer starts, a retryable failure (connection, 5xx, 429/503) gets a new
 * attempt on another instance after the usual backoff; an engine 4xx is relayed as it came.
 */
export class OneInstanceForwarder {
  private readonly transports: LegTransports;
  private readonly clientError: ClientErrorFilter;

  constructor(private readonly deps: DispatcherDeps) {
    const { upstreams, log, publicUrl, peerSecrets, config } = deps;
    this.transports = new LegTransports({
      upstreams,
      stopMs: config.timeouts.stopMs,
      log,
      publicUrl,
      peerSecrets,
    });
    this.clientError = clientErrorFilter(config.server.instanceErrorsToClients, log);
  }

  async forward(res: ServerResponse, r: OneInstanceRequest): Promise<void> {
    const { config, scheduling, source } = this.deps;
    const { cancellation } = r;
    const obs = (this.deps.observer ?? noopDispatchObserver).requestStart({
      rootRequestId: r.rootRequestId,
      path: r.path,
      model: r.model,
      stream: false,
      headers: res.req.headers,
    });
    const request: SchedulingRequest = {
      model: r.model,
      promptTokens: Math.ceil(r.bytes.length / BYTES_PER_TOKEN),
      apiKey: r.apiKey,
    };
    const exclude = new Set<string>();
    let failure: MotorError | null = null;
    cancellation.startDeadline(config.timeouts.totalMs);
    try {
      for (let seq = 1; seq <= config.retry.maxAttempts; seq++) {
        if (seq > 1) await cancellation.sleep(backoffDelayMs(seq, config.retry));
        if (cancellation.cancelled) break;
        let instance: Instance;
        try {
          const selection = scheduling.selectOne(
            source.routable(),
            request,
            exclude,
            config.dispatch.oneInstanceRoles,
          );
          if (selection.route.kind !== 'single') throw new MotorError('internal', 'selectOne chose a pair');
          instance = selection.route.instance;
          obs.attempt(seq, routeSummary(selection.route));
        } catch (err) {
          failure = err instanceof MotorError ? err : new MotorError('internal', String(err));
          break;
        }
        failure = await this.attempt(instance, r, request, res, obs);
        if (failure === null) return;
        if (res.headersSent || cancellation.cancelled || !failure.retryable) break;
        obs.retry(seq, failure.code);
        if (failure.instanceId) exclude.add(failure.instanceId);
      }
      if (cancellation.deadlineHit || failure === null) failure = cancellation.reason ?? failure;
      if (!cancellation.clientGone)
        new OpenAiPassThroughSink(res, r.rootRequestId, false).fail(
          this.clientError(failure ?? new MotorError('internal', 'no attempt was made'), r.rootRequestId),
        );
    } finally {
      cancellation.close();
      obs.end(res.statusCode, failure?.code ?? null);
    }
  }

  /** One leg; null = the answer was relayed, else why the attempt failed. */
  private async attempt(
    instance: Instance,
    r: OneInstanceRequest,
    request: SchedulingRequest,
    res: ServerResponse,
    obs: RequestObserver,
  ): Promise<MotorError | null> {
    const { source, scheduling, upstreams } = this.deps;
    const transport = this.transports.for(instance);
    const claim = source.acquire ? source.acquire(instance) : () => {};
    const leg = new Leg(instance, 'single', transport, claim, r.bytes.length);
    leg.tracking = scheduling.beginLeg(instance, 'single', request, 0, null);
    const headers: Record<string, string> = {
      ...transport.passThroughHeaders(),
      'x-request-id': r.rootRequestId,
      [HOP_HEADER]: r.hops,
    };
    leg.obs = obs.legStart('single', instance.id, headers);
    const abort = (): void => leg.ctl.abort();
    r.cancellation.onCancel(abort);
    let failure: MotorError | null = null;
    try {
      if (claim === undefined)
        throw new MotorError('instance_withdrawn', `instance ${instance.id} no longer takes new work`, {
          instanceId: instance.id,
        });
      let up;
      try {
        up = await upstreams.request(instance, { path: r.path, body: r.bytes, headers, signal: leg.ctl });
      } catch (err) {
        if (!leg.ctl.aborted && !leg.uploadRefused(err))
          source.reportFailure?.(instance, (err as Error).message);
        throw r.cancellation.reason ?? leg.connectionError(err);
      }
      leg.status = up.statusCode;
      source.reportSuccess?.(instance);
      leg.obs.firstByte();
      const contentType = headerValue(up.headers['content-type']) ?? 'application/json';
      if (up.statusCode < 200 || up.statusCode >= 300) {
        const body = await readAll(up.body);
        throw leg.engineStatusError({ status: up.statusCode, body, contentType });
      }
      await relay(res, up, contentType, r.rootRequestId, obs);
      return null;
    } catch (err) {
      failure = err instanceof MotorError ? err : leg.connectionError(err);
      obs.attemptFailed(failure.code, 'other');
      return failure;
    } finally {
      r.cancellation.off(abort);
      leg.obs.end(failure?.code ?? null);
      leg.release(failure);
    }
  }
}

/** The engine's 2xx answer to the client: its status, type and length, then its bytes as they come. */
async function relay(
  res: ServerResponse,
  up: Awaited<ReturnType<DispatcherDeps['upstreams']['request']>>,
  contentType: string,
  rootRequestId: string,
  obs: RequestObserver,
): Promise<void> {
  const head: Record<string, string> = { 'content-type': contentType, 'x-request-id': rootRequestId };
  const length = headerValue(up.headers['content-length']);
  if (length !== undefined) head['content-length'] = length;
  res.writeHead(up.statusCode, head);
  obs.committed();
  // a break mid-body (engine or client) destroys both sides: the client sees a cut, never a short 200
  await pipeline(up.body, res);
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
