import { afterEach, describe, expect, it } from 'vitest';
import { CachedTokensSamples } from '../src/coordinator/doctor/cached-tokens-samples.js';
import { DispatchHarness, type EngineScript } from '../src/coordinator/dispatch/testing/dispatch-harness.js';
import type { DispatcherDeps } from '../src/coordinator/dispatch/attempt/dispatcher.js';
import { COMPLETION, json } from '../src/coordinator/dispatch/testing/engine-replies.js';

/**
 * The dispatch hooks that feed `motor doctor`'s `cached_tokens` check: a predicted request's cached
 * tokens as the engine reported them are sampled per instance — from the prefill answer of a P/D pair,
 * and from a union instance's non-stream answer (read as bytes) — and nothing is sampled without a
 * prediction. (The assembled answer of a streamed single leg is covered end to end: doctor.test.ts.)
 */

const USAGE = { prompt_tokens: 40, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } };
const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

/** A harness whose dispatcher predicts `predicted` cached tokens per instance and samples into `samples`. */
function harness(
  instances: Record<string, unknown>[],
  engines: Record<string, EngineScript>,
  predicted: Record<string, number> | null,
): { h: DispatchHarness; samples: CachedTokensSamples } {
  const h = new DispatchHarness({ instances }, engines);
  harnesses.push(h);
  const samples = new CachedTokensSamples();
  // The harness builds its Dispatcher without these two optional deps: set them as the coordinator does.
  const deps = h.dispatcher.deps as { -readonly [K in keyof DispatcherDeps]: DispatcherDeps[K] };
  if (predicted !== null)
    deps.kvPrediction = async () => ({ promptTokens: 40, cachedTokens: new Map(Object.entries(predicted)) });
  (
    h.dispatcher as unknown as { services: { cachedTokensReported: DispatcherDeps['cachedTokensReported'] } }
  ).services.cachedTokensReported = (id, p, r) => samples.record(id, p, r);
  return { h, samples };
}

const direct = (id: string, role: string) => ({
  id,
  url: `http://${id.toLowerCase()}.test:1`,
  role,
  mode: 'direct',
  dispatchProfile: role === 'union' ? undefined : 'handoff',
});

describe('cached-token samples for motor doctor', () => {
  it('a P/D pair: the prefill answer’s cached_tokens against the prediction for the prefill instance', async () => {
    const { h, samples } = harness(
      [direct('P', 'prefill'), direct('D', 'decode')],
      {
        P: () => json({ ...COMPLETION, kv_transfer_params: { remote_engine_id: 'p' }, usage: USAGE }),
        D: () => json(COMPLETION),
      },
      { P: 32 },
    );
    expect((await h.send({ stream: false }))?.status).toBe(200);
    expect(samples.of('P')).toEqual([{ predicted: 32, reported: 32 }]);
    expect(samples.of('D')).toEqual([]);
  });

  it('a union instance: its non-stream answer’s cached_tokens, read without a parse', async () => {
    const { h, samples } = harness(
      [direct('U', 'union')],
      { U: () => json({ ...COMPLETION, usage: USAGE }) },
      { U: 16 },
    );
    expect((await h.send({ stream: false }))?.status).toBe(200);
    expect(samples.of('U')).toEqual([{ predicted: 16, reported: 32 }]);
  });

  it('nothing is sampled without a prediction for the instance', async () => {
    const { h, samples } = harness(
      [direct('U', 'union')],
      { U: () => json({ ...COMPLETION, usage: USAGE }) },
      null,
    );
    expect((await h.send({ stream: false }))?.status).toBe(200);
    expect(samples.of('U')).toEqual([]);
  });
});
