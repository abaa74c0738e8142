import { describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { BlockIndex } from '../../kv-events/block-index.js';
import type { KvEventsHub } from '../../kv-events/kv-events-hub.js';
import type { KvSubscriberStatus } from '../../kv-events/kv-event-subscriber.js';
import type { ClientRequest } from '../internal-request/client-request.js';
import { KvPredictor } from './kv-prediction.js';
import type { GroupPrompt, PromptBlockKeys } from './prompt-block-keys.js';
import { precisePrefixScorer } from '../../scheduling/plugins/precise-prefix-scorer.js';
import { CircuitBreakers } from '../../scheduling/circuit-breaker.js';
import { EngineMetricsStore } from '../../scheduling/engine-metrics.js';
import { LoadTracker } from '../../scheduling/load-tracker.js';
import type { SelectionContext } from '../../scheduling/plugin.js';
import { seededRandom } from '../../scheduling/seeded-random.js';
import { fleet, request } from '../../scheduling/testing/index.js';
import type { SchedulingRequest } from '../../scheduling/types.js';
import { ManualClock } from '../../common/clock.js';

const log = createLogger('kv-prediction-test', 'silent');
const client = { kind: 'chat', model: 'm', body: {} } as unknown as ClientRequest;
const status = (instance: string, over: Partial<KvSubscriberStatus> = {}): KvSubscriberStatus => ({
  instance,
  lastSeq: 3n,
  lastBatchAtMs: 0,
  lagMs: 0,
  batches: 4,
  gaps: 0,
  resyncs: 0,
  error: null,
  ...over,
});

function predictor(prompts: () => Promise<Map<string, GroupPrompt>>, statuses: KvSubscriberStatus[]) {
  const index = new BlockIndex();
  index.store('held', [1n, 2n, 3n]);
  index.store('down', [1n, 2n, 3n]);
  const keys = {
    prompts,
    groupOf: (id: string) => (id === 'other' ? 'g2' : 'g'),
  } as unknown as PromptBlockKeys;
  const hub = { index, status: () => statuses } as unknown as KvEventsHub;
  return new KvPredictor(keys, hub, log);
}

const prompt: GroupPrompt = { promptTokens: 50, blockKeys: BigUint64Array.from([1n, 2n, 3n]), blockSize: 16 };

describe('KvPredictor', () => {
  it.each([
    ['held blocks, last token never cached', status('held'), 48],
    ['an instance holding nothing: 0', status('cold'), 0],
    ['a failed stream: unknown', status('down', { error: 'boom' }), undefined],
    ['no batch yet: unknown', status('held', { lastSeq: null }), undefined],
    ['another group: unknown', status('other'), undefined],
  ])('%s', async (_name, st, want) => {
    const p = await predictor(async () => new Map([['g', prompt]]), [st]).predict(client);
    expect(p?.promptTokens).toBe(50);
    expect(p?.cachedTokens.get(st.instance)).toBe(want);
  });

  it('no keys, or a tokenizer failure: no prediction (approximate routing)', async () => {
    expect(await predictor(async () => new Map(), [status('held')]).predict(client)).toBeUndefined();
    const failing = predictor(() => Promise.reject(new Error('worker gone')), [status('held')]);
    expect(await failing.predict(client)).toBeUndefined();
  });
});

/**
 * Issue 17, routed but not yet prefilled: two turns of one conversation arrive back to back; the
 * second is routed before the first's prefill has published any event. Routing on events alone sees
 * no holder (a tie, decided by load); with the in-flight overlay the second goes where the first went.
 */
describe('KvPredictor in-flight overlay (precise-prefix routing)', () => {
  const turn = (n: number, blocks: number): GroupPrompt => ({
    promptTokens: n,
    blockKeys: BigUint64Array.from({ length: blocks }, (_, i) => 100n + BigInt(i)),
    blockSize: 16,
  });
  const turns = { t1: turn(70, 4), t2: turn(100, 6) }; // turn 2 repeats turn 1 and adds two blocks
  const clientOf = (t: keyof typeof turns) =>
    ({ kind: 'chat', model: 'm', body: { t } }) as unknown as ClientRequest;

  function setup(ttlMs = 30_000) {
    const clock = new ManualClock();
    const index = new BlockIndex();
    const keys = {
      prompts: async (c: ClientRequest) =>
        new Map([['g', turns[(c as unknown as { body: { t: keyof typeof turns } }).body.t]]]),
      groupOf: () => 'g',
    } as unknown as PromptBlockKeys;
    const hub = { index, status: () => [status('i0'), status('i1')] } as unknown as KvEventsHub;
    const predictor = new KvPredictor(keys, hub, log, {
      inflightTtlMs: ttlMs,
      maxInflightBlocks: 1000,
      now: () => clock.now(),
    });
    const scorer = precisePrefixScorer.create(precisePrefixScorer.params.parse({}), {
      clock,
      loadTracker: new LoadTracker(),
      engineMetrics: new EngineMetricsStore({ clock, staleAfterMs: 1000 }),
      breakers: new CircuitBreakers({ clock }),
      random: seededRandom(1),
    });
    const two = fleet('i', 'prefill', 2);
    const ctx = (req: SchedulingRequest): SelectionContext => ({
      request: req,
      role: 'prefill',
      nowMs: 0,
      random: seededRandom(3),
      blockHashes: () => [],
      noteCachedTokens: () => {},
    });
    /** Scores of [i0, i1] for a turn, after `pick` (if given) routed it. */
    const route = async (t: keyof typeof turns, pick?: 0 | 1) => {
      const kvPrediction = (await predictor.predict(clientOf(t)))!;
      const req = request('x', { kvPrediction });
      const out = new Float64Array(2);
      scorer.score(ctx(req), two, out);
      if (pick !== undefined) scorer.onPicked!(ctx(req), two[pick]!);
      return { out: [...out], kvPrediction };
    };
    return { clock, index, predictor, route };
  }

  it("routes turn 2 to turn 1's instance before any event arrives; cachedTokens stays events-only", async () => {
    const { route } = setup();
    const first = await route('t1', 1); // load (or a tie) put turn 1 on i1
    expect(first.out[0]).toBe(first.out[1]);
    const second = await route('t2');
    expect(second.out[1]).toBe(1);
    expect(second.out[0]).toBeLessThan(1);
    expect(second.kvPrediction.expectedCachedTokens?.get('i1')).toBe(64); // 4 blocks in flight
    expect(second.kvPrediction.cachedTokens.get('i1')).toBe(0); // what the engine reports today
  });

  it.each([
    ['its events store the blocks (confirmed, then evicted)', 'evicted'],
    ['the request fails (released)', 'released'],
    ['the TTL passes', 'expired'],
    ['the overlay is off (ttl 0)', 'off'],
  ] as const)('forgets the expectation when %s', async (_name, how) => {
    const { clock, index, predictor, route } = setup(how === 'off' ? 0 : 30_000);
    const first = await route('t1', 1);
    if (how === 'evicted') {
      index.store('i1', [100n, 101n, 102n, 103n]);
      expect(predictor.inflight.size).toBe(0);
      expect((await route('t2')).kvPrediction.cachedTokens.get('i1')).toBe(64);
      index.remove('i1', [102n, 103n]);
    }
    if (how === 'released') first.kvPrediction.release!();
    if (how === 'expired') clock.advance(30_000);
    const second = await route('t2');
    expect(second.kvPrediction.expectedCachedTokens?.get('i1')).toBeUndefined();
    expect(second.kvPrediction.cachedTokens.get('i1')).toBe(how === 'evicted' ? 32 : 0);
  });

  it('tells a routing-sync publisher each expectation and its release (the other replicas apply them)', async () => {
    const { predictor, route } = setup();
    const told: string[] = [];
    predictor.publisher = {
      expected: (instance, keys) => (told.push(`expected ${instance} ${keys.length}`), 'r1'),
      released: (routeId) => void told.push(`released ${routeId}`),
    };
    const first = await route('t1', 1);
    expect(told).toEqual(['expected i1 4']);
    first.kvPrediction.release!();
    first.kvPrediction.release!(); // once
    expect(told).toEqual(['expected i1 4', 'released r1']);
  });
});
