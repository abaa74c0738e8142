import type { IncomingMessage, ServerResponse } from 'node:http';
import { isPlainObject } from '../common/http.js';
import { jsonSource } from '../common/json-splice.js';
import type { ClientRoute } from '../engine-adapters/index.js';
import { MOTOR_DISPATCH_KEY, MOTOR_KEY_PREFIX, MOTOR_PREFILL_RESULT_KEY } from '../protocol/index.js';
import { checkEnvelope } from './envelope.js';
import { runGenerationLeg } from './generation-leg.js';
import { LegAttempt } from './leg-attempt.js';
import { passThrough } from './pass-through.js';
import { runPrefillLeg } from './prefill-leg.js';
import type { ProxyContext } from './proxy-context.js';
import { ProxyError, sendError } from './proxy-error.js';
import { prepareTriggerLeg } from './trigger-leg.js';

/** How a Motor key starts in a JSON body written without escapes: `"_motor_`. */
const MOTOR_KEY_OPENING = Buffer.from(`"${MOTOR_KEY_PREFIX}`);

/**
 * `POST /v1/chat/completions` and `/v1/completions`: a body without a Motor envelope passes through
 * unchanged; with one, the envelope is checked, the attempt registered, and its leg run.
 */
export async function completionsRoute(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: ClientRoute,
): Promise<void> {
  const raw = await ctx.bodies.raw(req);
  const path = route === 'chat' ? '/v1/chat/completions' : '/v1/completions';
  // A byte search is enough only without JSON escapes: `"\u005fmotor_dispatch"` is the same key.
  if (raw.indexOf(MOTOR_KEY_OPENING) < 0 && raw.indexOf('\\u') < 0) {
    return passThrough(ctx, req, res, raw, path);
  }
  const members: number[] = [];
  const body = ctx.bodies.parseJson(raw, members);
  if (!isPlainObject(body)) return passThrough(ctx, req, res, raw, path);
  if (!(MOTOR_DISPATCH_KEY in body)) {
    if (!(MOTOR_PREFILL_RESULT_KEY in body)) return passThrough(ctx, req, res, raw, path);
    const message = `${MOTOR_PREFILL_RESULT_KEY} needs a ${MOTOR_DISPATCH_KEY}`;
    return sendError(res, new ProxyError('invalid_request', message, { param: MOTOR_PREFILL_RESULT_KEY }));
  }
  const envelope = checkEnvelope(body, ctx.opts, ctx.adapter);
  if (envelope instanceof ProxyError) {
    ctx.metrics.dispatches.inc({ role: 'unknown', leg: 'unknown', outcome: 'rejected' });
    return sendError(res, envelope);
  }
  const { dispatch, leg } = envelope;
  const begun = ctx.tracker.begin(dispatch);
  if (!begun.ok) {
    ctx.metrics.dispatches.inc({ role: dispatch.role, leg, outcome: 'refused' });
    return sendError(res, new ProxyError(begun.code, begun.message));
  }
  if (leg === 'trigger_prefill') return prepareTriggerLeg(ctx, res, envelope, begun.handle, path);
  // the engine body is spliced from these bytes: the adapter changes only top-level members
  const attempt = new LegAttempt(ctx, req, res, begun.handle, dispatch, leg, jsonSource(raw, members, body));
  if (leg === 'handoff_prefill' || leg === 'bootstrap_prefill')
    return runPrefillLeg(ctx, attempt, envelope, path);
  return runGenerationLeg(ctx, attempt, envelope, path, route);
}
