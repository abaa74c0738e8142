import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../common/logger.js';
import { startSimulator, type RunningSimulator } from './server.js';
import {
  budgetConfigError,
  planStep,
  StepBudget,
  type BudgetParams,
  type StepClock,
  type StepRecord,
} from './step-budget.js';
import { http, post, type LedgerSnapshot } from './testing/index.js';
import { AbortedError } from './timing.js';

const P: BudgetParams = {
  timeScale: 1,
  prefillOverheadMs: 10,
  prefillMsPerToken: 0.1,
  itlMs: 15,
  loadSlowdown: 0,
  kvTransferMsPerBlock: 0,
  maxNumBatchedTokens: 2048,
  enableChunkedPrefill: true,
  longPrefillTokenThreshold: 0,
};
const OFF = { ...P, enableChunkedPrefill: false };

describe('planStep (vLLM V1 Scheduler.schedule token budget)', () => {
  it.each([
    ['one long prompt is chunked', [4096], 0, P, [2048]],
    ['FCFS: the second waits for the first', [4096, 4096], 0, P, [2048, 0]],
    ['the rest of the budget goes to the next prompt', [1000, 4096], 0, P, [1000, 1048]],
    ['decodes take one token each, first', [4096], 10, P, [2038]],
    ['decodes fill the budget: no prefill', [100], 2048, P, [0]],
    [
      'long_prefill_token_threshold caps each',
      [4096, 4096],
      0,
      { ...P, longPrefillTokenThreshold: 512 },
      [512, 512],
    ],
    ['chunked off: what fits runs whole', [1000, 1000], 0, OFF, [1000, 1000]],
    [
      'chunked off: a prompt over what is left waits, and all behind it',
      [1000, 2000, 10],
      0,
      OFF,
      [1000, 0, 0],
    ],
    ['chunked off: decodes leave too little', [2000], 100, OFF, [0]],
  ])('%s', (_name, remaining, decodes, params, want) => {
    expect(planStep(remaining, decodes, params)).toEqual(want);
  });

  it.each([
    [OFF, 4096, 'is smaller than --max-model-len'],
    [OFF, 2048, null],
    [P, 32768, null],
  ])('start-up check %#', (p, maxModelLen, want) => {
    const err = budgetConfigError({ ...p, maxModelLen });
    if (want === null) expect(err).toBeNull();
    else expect(err).toContain(want);
  });
});

/** Steps take no wall time: `now` advances by each step's ms (one event-loop turn per step). */
class VirtualClock implements StepClock {
  now = 0;
  start(): void {}
  wait(ms: number): Promise<void> {
    return new Promise((resolve) =>
      setImmediate(() => {
        this.now += ms;
        resolve();
      }),
    );
  }
}

/** Runs prefills submitted together; returns when (virtual ms) and in which order each finished. */
async function runTogether(
  tokens: number[],
  params: BudgetParams,
  decodes: (step: number) => number = () => 0,
): Promise<{ doneAt: number[]; order: number[]; steps: StepRecord[] }> {
  const clock = new VirtualClock();
  const steps: StepRecord[] = [];
  const budget = new StepBudget(
    params,
    () => decodes(steps.length),
    clock,
    (s) => steps.push(s),
  );
  const doneAt: number[] = [];
  const order: number[] = [];
  await Promise.all(
    tokens.map(async (t, i) => {
      await budget.prefill(t, new AbortController().signal);
      doneAt[i] = clock.now;
      order.push(i);
    }),
  );
  return { doneAt, order, steps };
}

const step = (tokens: number) => 10 + tokens * 0.1;

describe('StepBudget: prefill compute as a per-step token budget', () => {
  it('two concurrent 4k-token prefills at budget 2048 take twice as long as one (FCFS, 4 steps)', async () => {
    const one = await runTogether([4096], P);
    const two = await runTogether([4096, 4096], P);
    expect(one.steps.map((s) => s.chunks)).toEqual([[2048], [2048]]);
    expect(two.steps.map((s) => s.chunks)).toEqual([[2048, 0], [2048, 0], [2048], [2048]]);
    expect(two.order).toEqual([0, 1]);
    expect(one.doneAt[0]).toBeCloseTo(2 * step(2048));
    expect(two.doneAt[0]).toBeCloseTo(one.doneAt[0]!);
    expect(two.doneAt[1]! / one.doneAt[0]!).toBeCloseTo(2);
  });

  it('chunked prefill off: the long prompt waits until it fits, and FCFS holds the short one behind it', async () => {
    const on = await runTogether([1000, 2000, 500], P);
    const off = await runTogether([1000, 2000, 500], OFF);
    expect(on.steps.map((s) => s.chunks)).toEqual([
      [1000, 1048, 0],
      [952, 500],
    ]);
    expect(off.steps.map((s) => s.chunks)).toEqual([[1000, 0, 0], [2000, 0], [500]]);
    expect(off.order).toEqual([0, 1, 2]);
    expect(off.steps.length).toBeGreaterThan(on.steps.length);
  });

  it('chunked prefill off: a prompt that does not fit beside the running decodes waits for decode steps', async () => {
    // 100 decodes for the first 3 steps, then none: 2000 > 2048 - 100, so it waits 3 decode steps.
    const r = await runTogether([2000], OFF, (n) => (n < 3 ? 100 : 0));
    expect(r.steps.map((s) => [s.decodes, s.chunks[0]])).toEqual([
      [100, 0],
      [100, 0],
      [100, 0],
      [0, 2000],
    ]);
    expect(r.doneAt[0]).toBeCloseTo(3 * 15 + step(2000));
  });

  it.each([
    ['no prefill running', null, 15],
    ['a chunked 4k prefill shares the step', P, 15 + step(2047)],
    ['an unchunked 4k prefill shares the step', { ...OFF, maxNumBatchedTokens: 8192 }, 15 + step(4096)],
  ])('decode ITL: %s', async (_name, params, want) => {
    let release = (): void => {};
    const clock: StepClock = {
      start: () => {},
      wait: () => new Promise<void>((r) => (release = r)),
    };
    const budget = new StepBudget(params ?? P, () => 1, clock);
    const done = params === null ? undefined : budget.prefill(4096, new AbortController().signal);
    await null;
    await null;
    expect(budget.decodeStepMs(1, 1)).toBeCloseTo(want);
    release();
    if (done) {
      for (let i = 0; i < 4; i++) {
        await null;
        release();
      }
      await done;
    }
    expect(budget.decodeStepMs(1, 1)).toBe(15);
  });

  it('an aborted prefill leaves the queue at once and its budget goes to the next', async () => {
    const clock = new VirtualClock();
    const steps: StepRecord[] = [];
    const budget = new StepBudget(
      P,
      () => 0,
      clock,
      (s) => steps.push(s),
    );
    const ac = new AbortController();
    const first = budget.prefill(4096, ac.signal) as Promise<void>;
    const second = budget.prefill(1000, new AbortController().signal);
    ac.abort('client_disconnect');
    await expect(first).rejects.toBeInstanceOf(AbortedError);
    await second;
    expect(steps.map((s) => s.chunks)).toEqual([[1000]]);
  });

  it('time-scale 0: prefill is synchronous, no step runs', () => {
    const steps: StepRecord[] = [];
    const budget = new StepBudget(
      { ...P, timeScale: 0 },
      () => 0,
      new VirtualClock(),
      (s) => steps.push(s),
    );
    expect(budget.prefill(100_000, new AbortController().signal)).toBeUndefined();
    expect(steps).toEqual([]);
  });
});

describe('motor sim: concurrent prefills share the step budget (regression)', () => {
  // Before the budget each prefill ran on its own clock: both 4k prompts finished together, so B
  // was already decoding or done when A answered. Now B gets the budget only after A's two steps.
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator(
      { timeScale: 1, prefillOverheadMs: 0, prefillMsPerToken: 0.1, itlMs: 1, maxNumBatchedTokens: 2048 },
      createLogger('step-budget-test', 'silent'),
    );
  });
  afterAll(() => sim.close());

  it("the other 4k prompt is still prefilling when the first one's answer arrives", async () => {
    const prompt = (first: number) => [first, ...Array.from({ length: 4095 }, (_, i) => 1000 + (i % 5000))];
    const body = (id: string, first: number) => ({
      model: 'motor-sim-7b',
      prompt: prompt(first),
      max_tokens: 1,
      request_id: id,
    });
    const answers = ['a', 'b'].map((id, i) =>
      post(sim.url, '/v1/completions', body(id, i + 1)).then((r) => ({ id, status: r.status })),
    );
    const first = await Promise.race(answers);
    expect(first.status).toBe(200);
    const ledger = (await http(sim.url, 'GET', '/debug/requests')).json as LedgerSnapshot;
    const other = first.id === 'a' ? 'b' : 'a';
    expect(ledger.in_flight.map((r) => [r.id, r.state])).toEqual([[other, 'prefill']]);
    expect((await Promise.all(answers)).map((r) => r.status)).toEqual([200, 200]);
  });
});
