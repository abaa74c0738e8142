import {
  asSkippedHandoff,
  handoffExpired,
  normalizeResponseBody,
  SseNormalizer,
  type BootstrapAddress,
  type ClientRoute,
} from '../engine-adapters/index.js';
import { MOTOR_DISPATCH_KEY } from '../protocol/index.js';
import { drained } from './engine-reply.js';
import type { Envelope } from './envelope.js';
import { forwardableResponseHeaders, type EngineResponse } from './http-clients.js';
import type { EngineCallProfile, LegAttempt } from './leg-attempt.js';
import { attemptMetaserverUrl } from './metaserver-url.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError } from './proxy-error.js';

const GENERATION: EngineCallProfile = { legName: null, relayContentType: true, tagRequestId: false };

/** Single, and the handoff / trigger / bootstrap decode: forward, relay the (normalised) answer. */
export async function runGenerationLeg(
  ctx: ProxyContext,
  attempt: LegAttempt,
  env: Envelope,
  path: string,
  route: ClientRoute,
): Promise<void> {
  const { dispatch, leg } = env;
  let bootstrap: BootstrapAddress | null = null;
  if (leg === 'bootstrap_decode') {
    const found = await ctx.bootstrapDiscovery.discover(dispatch);
    if (found instanceof ProxyError) {
      // A peer that cannot tell its bootstrap address cannot run its prefill leg either: stop it.
      return attempt.refuse('rejected', found, found.status >= 500 ? found.message : null);
    }
    bootstrap = found;
  }
  if (leg === 'trigger_decode') {
    // The decode engine will call <prefill url>/v1/metaserver: only an allowed peer may be named.
    const url = dispatch.endpoints.prefill?.url;
    if (url && ctx.allow.check(url) === null) {
      ctx.metrics.peerRefused.inc({ use: 'metaserver' });
      const param = `${MOTOR_DISPATCH_KEY}.endpoints.prefill.url`;
      const message = `${param}: ${url} is not an allowed peer (--peer-allow)`;
      return attempt.refuse('rejected', new ProxyError('invalid_request', message, { param }), null);
    }
  }
  let prefillResult = env.prefillResult;
  if (leg === 'handoff_decode' && prefillResult && handoffExpired(prefillResult, ctx.clock.now())) {
    // Started after the prefill engine freed the blocks (handoff-ttl.ts): reading them would fail
    // or hang; a plain decode recomputes the prompt instead.
    ctx.log.warn(
      { request_id: dispatch.engine_request_id },
      'handoff expired before the decode; decoding without KV',
    );
    prefillResult = asSkippedHandoff(prefillResult);
  }
  const prefillUrl = leg === 'trigger_decode' ? dispatch.endpoints.prefill?.url : undefined;
  const built = ctx.adapter.buildEngineRequest(leg, {
    body: env.body,
    dispatch,
    prefillResult,
    bootstrap,
    // With a peer secret, a per-attempt URL the prefill's proxy can verify (metaserver-url.ts).
    metaserverUrl: prefillUrl ? attemptMetaserverUrl(ctx, prefillUrl, dispatch.engine_request_id) : null,
  });
  if (!built.ok) return attempt.refuse('rejected', ProxyError.fromAdapter(built), null);
  const ctl = attempt.wireAbort();
  const up = await attempt.callEngine(GENERATION, path, built, ctl.signal);
  if (up === null) return;
  await relayGeneration(attempt, up, { route, returnTokenIds: env.body.return_token_ids === true });
}

/** Streams (SSE) or relays whole the engine's answer, normalised for the client; finishes the attempt. */
async function relayGeneration(
  attempt: LegAttempt,
  up: EngineResponse,
  opts: { route: ClientRoute; returnTokenIds: boolean },
): Promise<void> {
  const { res, handle, dispatch } = attempt;
  const headers = forwardableResponseHeaders(up.headers, false);
  headers['x-request-id'] = dispatch.engine_request_id;
  const contentType = String(up.headers['content-type'] ?? '');
  try {
    if (contentType.includes('text/event-stream')) {
      res.writeHead(up.statusCode, headers);
      const sse = new SseNormalizer(opts);
      for await (const chunk of up.body) {
        const out = sse.push(chunk);
        if (out.length > 0 && !res.write(out)) await drained(res);
      }
      res.end(sse.flush());
    } else {
      const raw = Buffer.from(await up.body.arrayBuffer());
      const out = normalizeResponseBody(raw, opts);
      headers['content-length'] = String(out.length);
      res.writeHead(up.statusCode, headers);
      res.end(out);
    }
    handle.finish('done');
    attempt.count('completed');
  } catch {
    if (handle.stopReason !== null) {
      const streaming = res.headersSent;
      attempt.answerStopped();
      if (streaming) res.destroy();
      return;
    }
    // The engine died mid-answer: never end a 200 cleanly on a truncated body.
    handle.finish('done');
    attempt.count('upstream_error');
    res.destroy();
    await attempt.stopPeer('engine connection failed mid-response');
  }
}
