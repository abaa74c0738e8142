import { describe, expect, it } from 'vitest';
import { AdmissionController, type AdmissionResult, type AdmissionTicket } from './admission.js';
import { ManualClock } from '../common/clock.js';
import { TokenBucketLimiter } from './token-bucket-limiter.js';

/** Flushes promise callbacks (no timers involved). */
const settle = () => new Promise<void>((resolve) => queueMicrotask(resolve)).then(() => undefined);

function track(p: Promise<AdmissionResult>) {
  const box: { result?: AdmissionResult } = {};
  void p.then((r) => (box.result = r));
  return box;
}

function ticket(r: AdmissionResult | undefined): AdmissionTicket {
  if (!r?.admitted) throw new Error(`expected a ticket, got ${JSON.stringify(r)}`);
  return r;
}

describe('AdmissionController', () => {
  it('admits up to the limit, queues FIFO, hands slots over on release', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({ maxConcurrent: 2, maxQueue: 2, queueTimeoutMs: 1000, clock });
    const t1 = ticket(await a.acquire());
    ticket(await a.acquire());
    const w1 = track(a.acquire());
    const w2 = track(a.acquire());
    await settle();
    expect(a.queued).toBe(2);
    expect(w1.result).toBeUndefined();
    clock.advance(300);
    t1.release();
    t1.release(); // idempotent
    await settle();
    expect(ticket(w1.result).queuedMs).toBe(300);
    expect(w2.result).toBeUndefined();
    expect(a.inFlight).toBe(2);
    expect(a.queued).toBe(1);
  });

  it('rejects with 503 + Retry-After when the queue is full', async () => {
    const a = new AdmissionController({
      maxConcurrent: 1,
      maxQueue: 1,
      retryAfterSeconds: 2,
      clock: new ManualClock(),
    });
    await a.acquire();
    void a.acquire();
    expect(await a.acquire()).toMatchObject({
      admitted: false,
      reason: 'queue_full',
      status: 503,
      retryAfterSeconds: 2,
    });
    expect(a.rejections.queue_full).toBe(1);
  });

  it('with no queue rejects at once', async () => {
    const a = new AdmissionController({ maxConcurrent: 1, clock: new ManualClock() });
    await a.acquire();
    expect(await a.acquire()).toMatchObject({ reason: 'queue_full' });
  });

  it('times queued requests out in order and leaves no timer behind', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({ maxConcurrent: 1, maxQueue: 5, queueTimeoutMs: 1000, clock });
    const t = ticket(await a.acquire());
    const w1 = track(a.acquire());
    clock.advance(400);
    const w2 = track(a.acquire());
    expect(clock.pendingTimers).toBe(1);
    clock.advance(600);
    await settle();
    expect(w1.result).toMatchObject({ admitted: false, reason: 'queue_timeout', status: 503 });
    expect(w2.result).toBeUndefined();
    clock.advance(399);
    await settle();
    expect(w2.result).toBeUndefined();
    clock.advance(1);
    await settle();
    expect(w2.result).toMatchObject({ reason: 'queue_timeout' });
    expect(clock.pendingTimers).toBe(0);
    t.release();
    expect(a.inFlight).toBe(0);
  });

  it('an abort while queued frees the place and the timer', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({ maxConcurrent: 1, maxQueue: 1, clock });
    const t = ticket(await a.acquire());
    const controller = new AbortController();
    const w = track(a.acquire({ signal: controller.signal }));
    controller.abort();
    await settle();
    expect(w.result).toMatchObject({ reason: 'aborted' });
    expect(a.queued).toBe(0);
    expect(clock.pendingTimers).toBe(0);
    t.release();
    expect(a.inFlight).toBe(0);
    expect(ticket(await a.acquire()).admitted).toBe(true);
  });

  it('a signal factory is called only when the request has to queue', async () => {
    const a = new AdmissionController({ maxConcurrent: 1, maxQueue: 1, clock: new ManualClock() });
    const made: AbortController[] = [];
    const signal = () => {
      made.push(new AbortController());
      return made.at(-1)!.signal;
    };
    ticket(await a.acquire({ signal }));
    expect(made).toHaveLength(0);
    const w = track(a.acquire({ signal }));
    expect(made).toHaveLength(1);
    made[0]!.abort();
    await settle();
    expect(w.result).toMatchObject({ reason: 'aborted' });
  });

  it('an aborted waiter in the middle is skipped', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({ maxConcurrent: 1, maxQueue: 3, clock });
    const t = ticket(await a.acquire());
    const c = new AbortController();
    const w1 = track(a.acquire({ signal: c.signal }));
    const w2 = track(a.acquire());
    c.abort();
    t.release();
    await settle();
    expect(w1.result).toMatchObject({ reason: 'aborted' });
    expect(ticket(w2.result).admitted).toBe(true);
  });

  it('close() rejects waiters and new requests', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({ maxConcurrent: 1, maxQueue: 3, clock });
    await a.acquire();
    const w = track(a.acquire());
    a.close();
    await settle();
    expect(w.result).toMatchObject({ reason: 'closed', status: 503 });
    expect(await a.acquire()).toMatchObject({ reason: 'closed' });
    expect(clock.pendingTimers).toBe(0);
  });

  it('rate-limits per API key with 429 and a Retry-After', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({
      maxConcurrent: 100,
      rateLimit: { ratePerSecond: 2, burst: 2 },
      clock,
    });
    expect((await a.acquire({ apiKey: 'k1' })).admitted).toBe(true);
    expect((await a.acquire({ apiKey: 'k1' })).admitted).toBe(true);
    expect(await a.acquire({ apiKey: 'k1' })).toMatchObject({
      admitted: false,
      reason: 'rate_limited',
      status: 429,
      retryAfterSeconds: 1,
    });
    expect((await a.acquire({ apiKey: 'k2' })).admitted).toBe(true);
    clock.advance(500);
    expect((await a.acquire({ apiKey: 'k1' })).admitted).toBe(true);
  });
});

describe('TokenBucketLimiter', () => {
  it.each([
    {
      name: 'burst then refill',
      rate: 10,
      burst: 3,
      steps: [
        [0, true],
        [0, true],
        [0, true],
        [0, false],
        [100, true],
        [0, false],
      ],
    },
    {
      name: 'refill is capped at burst',
      rate: 10,
      burst: 2,
      steps: [
        [10_000, true],
        [0, true],
        [0, false],
      ],
    },
  ] as const)('$name', ({ rate, burst, steps }) => {
    const clock = new ManualClock();
    const l = new TokenBucketLimiter({ ratePerSecond: rate, burst, clock });
    for (const [advance, allowed] of steps) {
      clock.advance(advance);
      expect(l.take('k').allowed).toBe(allowed);
    }
  });

  it('reports the wait until the next token', () => {
    const l = new TokenBucketLimiter({ ratePerSecond: 4, burst: 1, clock: new ManualClock() });
    l.take('k');
    expect(l.take('k')).toEqual({ allowed: false, retryAfterMs: 250 });
  });

  it('bounds the number of keys (LRU)', () => {
    const l = new TokenBucketLimiter({ ratePerSecond: 1, burst: 1, maxKeys: 3, clock: new ManualClock() });
    for (const k of ['a', 'b', 'c', 'a', 'd']) l.take(k);
    expect(l.size).toBe(3);
    expect(l.take('a').allowed).toBe(false); // still remembered (recently used)
    expect(l.take('b').allowed).toBe(true); // evicted → fresh bucket
  });
});

describe('AdmissionController body budget (maxInflightBodyBytes)', () => {
  const budget = (maxQueue = 4) =>
    new AdmissionController({
      maxConcurrent: 10,
      maxQueue,
      maxInflightBodyBytes: 100,
      clock: new ManualClock(),
    });

  it('counts declared bodies; one that does not fit waits FIFO for the bytes, not for a slot', async () => {
    const a = budget();
    const t1 = ticket(await a.acquire({ bodyBytes: 60 }));
    ticket(await a.acquire({ bodyBytes: 40 }));
    expect(a.inflightBodyBytes).toBe(100);
    const w1 = track(a.acquire({ bodyBytes: 50 }));
    const w2 = track(a.acquire({ bodyBytes: 0 })); // behind w1: FIFO, even though it fits
    await settle();
    expect([w1.result, w2.result, a.queued]).toEqual([undefined, undefined, 2]);
    t1.release();
    await settle();
    expect(ticket(w1.result).admitted).toBe(true);
    expect(ticket(w2.result).admitted).toBe(true);
    expect(a.inflightBodyBytes).toBe(90);
  });

  it.each<[string, number, string]>([
    ['declared larger than the whole budget', 101, 'body_budget'],
    ['no room and no queue', 70, 'queue_full'],
  ])('%s → 503 %s at once', async (_name, bodyBytes, reason) => {
    const a = budget(0);
    ticket(await a.acquire({ bodyBytes: 40 }));
    expect(await a.acquire({ bodyBytes })).toMatchObject({ admitted: false, reason, status: 503 });
    expect(a.rejections[reason as 'body_budget' | 'queue_full']).toBe(1);
    expect(a.tryAcquire({ bodyBytes })).toMatchObject({ message: expect.stringMatching(/\bbytes\b/) });
    expect(a.inflightBodyBytes).toBe(40);
  });

  it('grows a chunked body while it fits, refuses the chunk that does not, frees all on release', async () => {
    const a = budget();
    const t = ticket(await a.acquire());
    expect([t.grow(60), t.grow(40), t.grow(1)]).toEqual([true, true, false]);
    expect(a.inflightBodyBytes).toBe(100);
    expect(a.rejections.body_budget).toBe(1);
    t.release();
    expect(a.inflightBodyBytes).toBe(0);
    expect(t.grow(1)).toBe(false); // after release nothing more is counted
  });

  it('charge() counts an admitted request’s extra body without refusing it; later requests wait for it', async () => {
    const a = budget();
    const charge = a.charge(80);
    expect(charge.grow(40)).toBe(true); // over the budget: counted anyway
    expect(a.inflightBodyBytes).toBe(120);
    const w = track(a.acquire({ bodyBytes: 10 }));
    await settle();
    expect(w.result).toBeUndefined();
    charge.release();
    charge.release(); // idempotent
    await settle();
    expect(ticket(w.result).admitted).toBe(true);
    expect(a.inflightBodyBytes).toBe(10);
  });
});

describe('AdmissionController body reservation and client shares', () => {
  const budget = (opts: { reservation?: number; share?: number } = {}) =>
    new AdmissionController({
      maxConcurrent: 100,
      maxQueue: 4,
      maxInflightBodyBytes: 100,
      bodyReservationBytes: opts.reservation ?? 10,
      maxClientBodyBytes: opts.share,
      clock: new ManualClock(),
    });

  it.each<[string, number, number[], number[]]>([
    // declared, arrivals → counted after each
    ['a small body is reserved whole and arrives within it', 8, [5, 3], [8, 8]],
    ['a large body: what arrived plus a reservation for the rest', 50, [5, 20, 20, 5], [15, 35, 50, 50]],
    ['a chunked body: what arrived', 0, [5, 20], [5, 25]],
  ])('%s', async (_name, declared, arrivals, expected) => {
    const a = budget();
    const t = ticket(await a.acquire({ bodyBytes: declared, client: 'c' }));
    const counted = arrivals.map((bytes) => (t.grow(bytes), a.inflightBodyBytes));
    expect(counted).toEqual(expected);
    expect(a.clientBodyBytes('c')).toBe(expected.at(-1));
    t.release();
    expect([a.inflightBodyBytes, a.clientBodyBytes('c')]).toEqual([0, 0]);
  });

  it('ten slow uploaders declaring the whole budget hold only their reservations; another is admitted at once', async () => {
    const a = budget();
    const slow = await Promise.all(Array.from({ length: 9 }, () => a.acquire({ bodyBytes: 100 })));
    for (const t of slow) expect(ticket(t).grow(1)).toBe(true);
    expect(a.inflightBodyBytes).toBe(9 * 11);
    const other = a.tryAcquire({ bodyBytes: 1 });
    expect(other).toMatchObject({ admitted: true, queuedMs: 0 });
  });

  it('a body whose arrival outgrows the budget is refused, counting nothing more', async () => {
    const a = budget({ reservation: 0 });
    const t1 = ticket(await a.acquire({ bodyBytes: 80 }));
    const t2 = ticket(await a.acquire({ bodyBytes: 80 }));
    expect([t1.grow(80), t2.grow(30)]).toEqual([true, false]);
    expect(a.inflightBodyBytes).toBe(80);
    expect(a.rejections.body_budget).toBe(1);
  });

  it('one client over its share is refused 429 at once, queued or not; others are not', async () => {
    const a = budget({ share: 25 });
    const t1 = ticket(await a.acquire({ bodyBytes: 100, client: 'greedy' }));
    ticket(await a.acquire({ bodyBytes: 100, client: 'greedy' }));
    expect(a.clientBodyBytes('greedy')).toBe(20);
    expect(await a.acquire({ bodyBytes: 100, client: 'greedy' })).toMatchObject({
      admitted: false,
      reason: 'client_body_share',
      status: 429,
    });
    expect(t1.grow(6)).toBe(false); // 26 > 25: its arrival is refused too
    expect(a.rejections.client_body_share).toBe(2);
    expect(await a.acquire({ bodyBytes: 100, client: 'other' })).toMatchObject({ admitted: true });
    t1.release();
    expect(a.clientBodyBytes('greedy')).toBe(10);
  });

  it('a queued request holds its client share until it is granted or refused', async () => {
    const clock = new ManualClock();
    const a = new AdmissionController({
      maxConcurrent: 1,
      maxQueue: 4,
      queueTimeoutMs: 100,
      bodyReservationBytes: 10,
      maxClientBodyBytes: 20,
      clock,
    });
    const running = ticket(await a.acquire({ bodyBytes: 10, client: 'c' }));
    const queued = track(a.acquire({ bodyBytes: 10, client: 'c' }));
    await settle();
    expect(a.clientBodyBytes('c')).toBe(20);
    expect(a.tryAcquire({ bodyBytes: 10, client: 'c' })).toMatchObject({ reason: 'client_body_share' });
    clock.advance(100);
    await settle();
    expect(queued.result).toMatchObject({ reason: 'queue_timeout' });
    expect(a.clientBodyBytes('c')).toBe(10);
    running.release();
    expect(a.clientBodyBytes('c')).toBe(0);
  });
});
