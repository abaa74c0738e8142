import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import {
  engineIdOf,
  eventually,
  MODEL,
  NIXL,
  recorded,
  resetSim,
  setFaults,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';
import { RedisServer } from './helpers/redis-server.js';

/**
 * Coordinator replicas sharing routing state over a real Redis (Debian redis-server on a loopback
 * port): `motor coordinator` processes over `motor sim` instances, direct vLLM NIXL P/D. Every wait
 * is on an event — a metric reaching a value, a request recorded by an engine — never on wall time.
 */

let redis: RedisServer;
let P: MotorChild[] = [];
let D: MotorChild[] = [];
const replicas: CoordinatorHandle[] = [];

const inst = (id: string, sim: MotorChild, role: 'prefill' | 'decode') => ({
  id,
  url: sim.url,
  role,
  mode: 'direct',
  models: [MODEL],
  kvTransferConfig: NIXL,
});

/**
 * One config for every replica, as a deployment has. The seed makes each replica's tie breaks the
 * same sequence, so replicas that do not share state repeat each other's picks (what the tests
 * below must tell apart from shared state).
 */
const replicaConfig = (redisUrl = redis.url) => ({
  retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
  instances: [
    inst('P0', P[0]!, 'prefill'),
    inst('P1', P[1]!, 'prefill'),
    inst('P2', P[2]!, 'prefill'),
    inst('D0', D[0]!, 'decode'),
    inst('D1', D[1]!, 'decode'),
  ],
  scheduling: { policy: 'prefix-affinity', seed: 7 },
  // generous timeouts: the machine runs at load 20+, and a replica dropped as silent would break the test
  routingSync: {
    redis: { url: redisUrl },
    channel: 'motor-test-replicas',
    heartbeatMs: 200,
    peerTimeoutMs: 60_000,
    warmStartTimeoutMs: 60_000,
  },
});

const startReplica = async (): Promise<CoordinatorHandle> => {
  const r = await startCoordinatorProcess(replicaConfig());
  replicas.push(r);
  return r;
};

beforeAll(async () => {
  redis = await RedisServer.start();
  const sims = await Promise.all([
    startSim({ role: 'prefill' }),
    startSim({ role: 'prefill' }),
    startSim({ role: 'prefill' }),
    startSim({ role: 'decode' }),
    startSim({ role: 'decode' }),
  ]);
  P = sims.slice(0, 3);
  D = sims.slice(3);
  // one after the other: the second warm-starts from the first
  await startReplica();
  await startReplica();
}, 180_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await stopAllSpawned();
  await redis?.close();
});

beforeEach(async () => {
  await Promise.all([...P, ...D].map(resetSim));
});

type Sample = Record<string, number>;

/** The replica's `motor_routing_sync_*` metrics (unlabelled samples by name). */
async function syncMetrics(r: CoordinatorHandle): Promise<Sample> {
  const text = await (await fetch(`${r.url}/metrics`)).text();
  const out: Sample = {};
  for (const m of text.matchAll(/^(motor_routing_sync_\w+) (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const PUBLISHED = 'motor_routing_sync_ops_published_total';
const APPLIED = 'motor_routing_sync_ops_applied_total';

/**
 * Waits until every decision one replica published has been applied by the others (counted from
 * `base`, the metrics at a quiet moment, for a replica that joined later). A routing decision's index
 * record is published when the route is picked, before the request reaches an engine, so once a
 * response is back its record is counted in `published`.
 */
async function settled(group: CoordinatorHandle[], base?: Sample[]): Promise<Sample[]> {
  let now: Sample[] = [];
  await eventually(async () => {
    now = await Promise.all(group.map(syncMetrics));
    const delta = (i: number, key: string) => (now[i]![key] ?? 0) - (base?.[i]?.[key] ?? 0);
    for (let i = 0; i < group.length; i++) {
      let fromOthers = 0;
      for (let j = 0; j < group.length; j++) if (j !== i) fromOthers += delta(j, PUBLISHED);
      expect(delta(i, APPLIED)).toBeGreaterThanOrEqual(fromOthers);
    }
  }, 30_000);
  return now;
}

/** Conversations whose turns are sent through the replicas and traced to the prefill that served them. */
class Conversations {
  readonly messages: { role: string; content: string }[][];
  /** The prefill instances each conversation's turns were served by. */
  readonly owners: Set<string>[];

  constructor(tag: string, count: number) {
    this.messages = Array.from({ length: count }, (_, c) => [
      {
        role: 'system',
        content: `You are assistant ${tag}-${c}. ${'Answer briefly and keep the whole history in mind. '.repeat(6)}`,
      },
    ]);
    this.owners = this.messages.map(() => new Set());
  }

  async turn(c: number, via: CoordinatorHandle): Promise<void> {
    const messages = this.messages[c]!;
    messages.push({ role: 'user', content: `turn ${messages.length} of conversation ${c}: tell me more` });
    const { data, response } = await via.client.chat.completions
      .create({ model: MODEL, messages: messages as never, max_tokens: 8 })
      .withResponse();
    messages.push({ role: 'assistant', content: data.choices[0]!.message.content ?? '' });
    const root = response.headers.get('x-request-id')!;
    for (let i = 0; i < P.length; i++)
      if ((await recorded(P[i]!)).some((r) => engineIdOf(r)?.startsWith(root))) this.owners[c]!.add(`P${i}`);
  }
}

describe('coordinator replicas sharing routing state over Redis', () => {
  it('the later turns of multi-turn conversations land where their KV is, through either replica', async () => {
    const [a, b] = replicas as [CoordinatorHandle, CoordinatorHandle];
    const talk = new Conversations('split', 8);
    for (let turn = 0; turn < 4; turn++)
      for (let c = 0; c < 8; c++) {
        await talk.turn(c, (turn + c) % 2 === 0 ? a : b);
        await settled([a, b]);
      }
    expect(talk.owners.map((o) => o.size)).toEqual(Array(8).fill(1));
    expect(new Set(talk.owners.map((o) => [...o][0])).size).toBeGreaterThan(1); // not all on one prefill
  }, 180_000);

  it('8 concurrent streams over two decodes through two alternating replicas split 4/4', async () => {
    const [a, b] = replicas as [CoordinatorHandle, CoordinatorHandle];
    // decode legs are held open (the sim waits for the client to go away), so every stream's decode
    // load is still counted when the next is routed
    await Promise.all(D.map((d) => setFaults(d, { hang_before_first_token_ms: -1 })));
    const aborts: AbortController[] = [];
    const decodeCounts = async () => Promise.all(D.map(async (d) => (await recorded(d)).length));
    const splits: number[][] = [];
    try {
      for (let i = 0; i < 8; i++) {
        const via = i % 2 === 0 ? a : b;
        const abort = new AbortController();
        aborts.push(abort);
        void fetch(`${via.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: MODEL,
            stream: true,
            max_tokens: 4,
            messages: [{ role: 'user', content: `stream ${i}` }],
          }),
          signal: abort.signal,
        }).catch(() => undefined);
        // its decode leg reached an engine, and its reservation reached the other replica
        await eventually(async () => {
          const counts = await decodeCounts();
          expect(counts[0]! + counts[1]!).toBe(i + 1);
        }, 30_000);
        await settled([a, b]);
        splits.push(await decodeCounts());
      }
    } finally {
      for (const abort of aborts) abort.abort();
    }
    // balanced after every pair of streams, not only at the end
    for (let i = 1; i < 8; i += 2) expect(splits[i]![0]).toBe(splits[i]![1]);
    expect(splits[7]).toEqual([4, 4]);
  }, 180_000);

  it('Redis stopped: both replicas keep routing (warning, metric); restarted: they converge', async () => {
    const [a, b] = replicas as [CoordinatorHandle, CoordinatorHandle];
    const before = await Promise.all([a, b].map(syncMetrics));
    await redis.stop();
    await eventually(async () => {
      for (const m of await Promise.all([a, b].map(syncMetrics))) expect(m.motor_routing_sync_up).toBe(0);
    }, 30_000);
    // during the outage each replica routes on its own: the first turns of conversations 0-1 via
    // a, 2-3 via b; what they learn is not published
    const talk = new Conversations('outage', 4);
    for (let c = 0; c < 4; c++) await talk.turn(c, c < 2 ? a : b);
    const during = await Promise.all([a, b].map(syncMetrics));
    for (let i = 0; i < 2; i++) {
      expect(during[i]!.motor_routing_sync_ops_dropped_total).toBeGreaterThan(
        before[i]!.motor_routing_sync_ops_dropped_total!,
      );
      expect(during[i]!.motor_routing_sync_outages_total).toBe(
        before[i]!.motor_routing_sync_outages_total! + 1,
      );
      expect(
        [a, b][i]!.child.logs.some((l) => String(l.msg).startsWith('routing sync: bus unreachable')),
      ).toBe(true);
    }
    await redis.restart();
    // back: each replica sent its state and merged the other's (index included)
    await eventually(async () => {
      const now = await Promise.all([a, b].map(syncMetrics));
      for (let i = 0; i < 2; i++) {
        expect(now[i]!.motor_routing_sync_up).toBe(1);
        expect(now[i]!.motor_routing_sync_peers).toBe(1);
        expect(now[i]!.motor_routing_sync_states_received_total).toBeGreaterThan(
          during[i]!.motor_routing_sync_states_received_total!,
        );
      }
    }, 60_000);
    // the second turns go through the other replica and still find their KV
    for (let c = 0; c < 4; c++) {
      await talk.turn(c, c < 2 ? b : a);
      await settled([a, b]);
    }
    expect(talk.owners.map((o) => o.size)).toEqual([1, 1, 1, 1]);
  }, 180_000);

  it('a replica joining late warm-starts from the others before it is ready', async () => {
    const [a, b] = replicas as [CoordinatorHandle, CoordinatorHandle];
    const talk = new Conversations('late', 6);
    for (let c = 0; c < 6; c++) await talk.turn(c, c % 2 === 0 ? a : b);
    await settled([a, b]);
    const c = await startReplica(); // resolves once it listens: after the warm start
    const first = await syncMetrics(c);
    expect(first.motor_routing_sync_warm_started).toBe(1);
    expect((await fetch(`${c.url}/ready`)).status).toBe(200);
    // nothing of the earlier history was broadcast since it subscribed: it came in the state answers
    expect(first[APPLIED]).toBe(0);
    for (let k = 0; k < 6; k++) await talk.turn(k, c);
    expect(talk.owners.map((o) => o.size)).toEqual(Array(6).fill(1));
  }, 180_000);

  it('a replica whose Redis is away at start-up serves on its own state, and joins when Redis comes', async () => {
    const late = await RedisServer.notStarted();
    try {
      const r = await startCoordinatorProcess(replicaConfig(late.url));
      replicas.push(r);
      const first = await syncMetrics(r);
      expect(first.motor_routing_sync_up).toBe(0);
      expect(first.motor_routing_sync_warm_started).toBe(0);
      await new Conversations('alone', 1).turn(0, r);
      await late.restart();
      await eventually(async () => expect((await syncMetrics(r)).motor_routing_sync_up).toBe(1), 60_000);
    } finally {
      await late.close();
    }
  }, 180_000);
});
