import { afterEach, describe, expect, it } from 'vitest';
import { DispatchHarness, type EngineReply } from '../testing/dispatch-harness.js';
import { delta } from '../testing/engine-replies.js';

/**
 * Issue 15 finding 4: a client that stops reading pauses the engine (backpressure); the idle watchdog
 * measures the engine only, and the client is cut after `timeouts.clientStallMs`, charged to nobody.
 * One failed leg opens the circuit here (`failureThreshold: 1`), so any charge shows.
 */

const U = [{ id: 'D', url: 'http://u.test:3', role: 'union' }];
const DONE = 'data: [DONE]\n\n';
/** A decode that streams fast: 32 KiB frames back to back, far more than the loopback sockets hold. */
const BIG = JSON.stringify(delta('x'.repeat(32 * 1024)));
const fastStream = (frames: number, end: 'done' | 'hang' = 'done'): EngineReply => ({
  kind: 'sse',
  frames: Array.from({ length: frames }, () => BIG),
  end,
});

const harnesses: DispatchHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
});

function harness(reply: EngineReply, timeouts: Record<string, number>): DispatchHarness {
  const h = new DispatchHarness(
    {
      retry: { maxAttempts: 1 },
      migration: { maxPerRequest: 0 }, // one attempt: what the client's stall does to it (migration.test.ts)
      timeouts,
      scheduling: { circuitBreaker: { failureThreshold: 1 } },
      instances: U,
    },
    { D: () => reply },
  );
  harnesses.push(h);
  return h;
}

describe('slow readers', () => {
  it('a client that stops reading is cut after clientStallMs with client_stalled; the breaker stays closed', async () => {
    const h = harness(fastStream(2000), { idleMs: 100, clientStallMs: 400 });
    const res = await h.sendSlowReader({ stream: true });
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false); // cut: no error frame, no [DONE] (nothing can reach it)
    expect(res.text).not.toContain('idle_timeout');
    expect(res.text.endsWith(DONE)).toBe(false);
    expect(h.observed('attemptFailed')).toEqual([['client_stalled', 'client_disconnect']]);
    expect(h.callsTo('D')[0]!.aborted).toBe(true);
    expect(h.stops.map((s) => s.body.reason)).toEqual(['client_disconnect']);
    expect(h.scheduling.scheduler.breakers.state('D')).toBe('closed');
  });

  it('a client that pauses longer than idleMs, then reads on, gets the whole answer', async () => {
    const h = harness(fastStream(300), { idleMs: 100, clientStallMs: 5_000 });
    const res = await h.sendSlowReader({ stream: true }, 400);
    expect(res.complete).toBe(true);
    expect(res.text.endsWith(DONE)).toBe(true);
    expect(res.text).not.toContain('idle_timeout');
    expect(h.observed('attemptFailed')).toEqual([]);
    expect(h.scheduling.scheduler.breakers.state('D')).toBe('closed');
  });

  it('clientStallMs 0: the client is never cut, and its pause is still not engine silence', async () => {
    const h = harness(fastStream(300), { idleMs: 100, clientStallMs: 0 });
    const res = await h.sendSlowReader({ stream: true }, 400);
    expect(res.complete).toBe(true);
    expect(h.observed('attemptFailed')).toEqual([]);
  });

  it('after a client pause the idle watchdog counts again: an engine that then goes silent is charged', async () => {
    const h = harness(fastStream(300, 'hang'), { idleMs: 100, clientStallMs: 5_000 });
    const res = await h.sendSlowReader({ stream: true }, 400);
    expect(res.text.endsWith(DONE)).toBe(true);
    expect(res.text).toContain('"code":"idle_timeout"');
    expect(h.observed('attemptFailed')).toEqual([['idle_timeout', 'timeout']]);
    expect(h.scheduling.scheduler.breakers.state('D')).toBe('open');
  });

  it('an engine that goes silent while the client reads still gets idle_timeout, charged', async () => {
    const h = harness(fastStream(3, 'hang'), { idleMs: 100, clientStallMs: 50 });
    const res = await h.send({ stream: true });
    expect(res?.text).toContain('"code":"idle_timeout"');
    expect(h.observed('attemptFailed')).toEqual([['idle_timeout', 'timeout']]);
    expect(h.scheduling.scheduler.breakers.state('D')).toBe('open');
  });
});
