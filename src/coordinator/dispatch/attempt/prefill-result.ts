import type { PrefillResult } from '../../../protocol/index.js';
import { MotorError } from '../../../common/motor-error.js';
import type { PdFlow } from '../../scheduling-bridge/route.js';
import { readAll } from '../../fleet/upstream.js';
import type { Attempt } from './attempt.js';
import type { Leg, ResponseData } from '../transport/leg.js';

/**
 * Awaits a prefill leg and reads its answer, through the leg's transport, as this attempt's
 * PrefillResult, or the failure (which marks the attempt's prefill as failed, for the retry policy).
 */
export async function awaitPrefill(
  attempt: Attempt,
  leg: Leg,
  flow: PdFlow,
): Promise<PrefillResult | MotorError> {
  const { instance } = leg;
  const fail = (err: MotorError): MotorError => {
    attempt.prefillFailed = true;
    return err;
  };
  let res: ResponseData;
  let body: Buffer;
  try {
    res = await leg.response!;
    body = await readAll(res.body);
  } catch (err) {
    return attempt.failure ?? fail(leg.connectionError(err));
  }
  if (attempt.failure) return attempt.failure;
  if (res.statusCode !== 200) {
    return fail(
      leg.engineStatusError({
        status: res.statusCode,
        body,
        contentType: String(res.headers['content-type'] ?? 'application/json'),
      }),
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return fail(
      new MotorError('protocol_error', `prefill instance ${instance.id} answered invalid JSON`, {
        instanceId: instance.id,
      }),
    );
  }
  const result = leg.transport.prefillResult(instance, json, attempt.ids, flow);
  return result instanceof MotorError ? fail(result) : result;
}

/** A completed prefill: the non-stream watchdog stands down; its cached tokens go into the usage. */
export function prefillCompleted(attempt: Attempt, result: PrefillResult): void {
  attempt.prefillDone();
  attempt.ctx.rewrite.cachedTokens = cachedTokensOf(result.usage);
  if (attempt.route.kind === 'pd') {
    attempt.reportedCachedTokens(attempt.route.prefill.id, attempt.ctx.rewrite.cachedTokens);
    // A skipped handoff recomputes by design (counted as prefill_kv_skipped), not a silent failure.
    attempt.ctx.rewrite.onDecodeUsage =
      result.status === 'completed' ? (usage) => attempt.decodeUsageReported(usage) : null;
  }
}

/** `usage.prompt_tokens_details.cached_tokens` of an engine answer; null when not reported. */
export function cachedTokensOf(usage: Record<string, unknown> | null | undefined): number | null {
  const details = usage?.prompt_tokens_details;
  if (typeof details !== 'object' || details === null) return null;
  const cached = (details as { cached_tokens?: unknown }).cached_tokens;
  return typeof cached === 'number' ? cached : null;
}
