import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { MotorError } from '../../../common/motor-error.js';
import { Cancellation } from './cancellation.js';
import { RequestCancellation } from './request-cancellation.js';

const err = (code: 'client_disconnect' | 'engine_error' | 'deadline_exceeded') => new MotorError(code, code);

describe('Cancellation', () => {
  it.each<[string, (parent: Cancellation, child: Cancellation) => void, string | null, string | null]>([
    [
      'the parent cancels its child',
      (p) => p.cancel(err('client_disconnect'), 'client_disconnect'),
      'client_disconnect',
      'client_disconnect',
    ],
    ['a child fails alone', (_p, c) => c.cancel(err('engine_error'), 'peer_failed'), null, 'engine_error'],
    [
      'a released child no longer hears the parent',
      (p, c) => {
        c.release();
        p.cancel(err('client_disconnect'), 'client_disconnect');
      },
      'client_disconnect',
      null,
    ],
    [
      'the first reason wins',
      (p) => {
        p.cancel(err('deadline_exceeded'), 'timeout');
        p.cancel(err('client_disconnect'), 'client_disconnect');
      },
      'deadline_exceeded',
      'deadline_exceeded',
    ],
  ])('%s', (_name, act, parentReason, childReason) => {
    const parent = new Cancellation();
    const child = parent.child();
    const heard: string[] = [];
    child.onCancel((reason, stop) => heard.push(`${reason.code}/${stop}`));
    act(parent, child);
    expect(parent.reason?.code ?? null).toBe(parentReason);
    expect(child.reason?.code ?? null).toBe(childReason);
    expect(heard).toEqual(childReason ? [`${childReason}/${child.stopReason}`] : []);
  });

  it('listeners run in order, once; a late listener runs at once', () => {
    const c = new Cancellation();
    const order: number[] = [];
    c.onCancel(() => order.push(1));
    c.onCancel(() => order.push(2));
    c.cancel(err('engine_error'), 'other');
    c.cancel(err('engine_error'), 'other');
    c.onCancel(() => order.push(3));
    expect(order).toEqual([1, 2, 3]);
  });
});

describe('RequestCancellation', () => {
  const response = (writableFinished: boolean) =>
    Object.assign(new EventEmitter(), { writableFinished }) as EventEmitter & { writableFinished: boolean };

  it.each([
    [false, 'client_disconnect'],
    [true, null], // the response ended first: a normal close
  ])('response closed (finished: %s) → %s', (finished, code) => {
    const res = response(finished);
    const c = new RequestCancellation(res);
    res.emit('close');
    expect(c.reason?.code ?? null).toBe(code);
    expect(c.clientGone).toBe(code !== null);
  });

  it('the deadline cancels with deadline_exceeded / timeout; close() stops it', () => {
    vi.useFakeTimers();
    try {
      const hit = new RequestCancellation(response(false));
      hit.startDeadline(100);
      const closed = new RequestCancellation(response(false));
      closed.startDeadline(100);
      closed.close();
      vi.advanceTimersByTime(100);
      expect([hit.reason?.code, hit.stopReason, hit.deadlineHit]).toEqual([
        'deadline_exceeded',
        'timeout',
        true,
      ]);
      expect(closed.cancelled).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a backoff sleep wakes on cancellation, not by polling', async () => {
    vi.useFakeTimers();
    try {
      const res = response(false);
      const c = new RequestCancellation(res);
      let woke = false;
      const sleeping = c.sleep(60_000).then(() => (woke = true));
      await vi.advanceTimersByTimeAsync(1_000);
      expect(woke).toBe(false);
      res.emit('close');
      await sleeping;
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('the admission signal is made on demand and aborts with the request', () => {
    const res = response(false);
    const c = new RequestCancellation(res);
    const signal = c.signal();
    expect(c.signal()).toBe(signal);
    expect(signal.aborted).toBe(false);
    res.emit('close');
    expect(signal.aborted).toBe(true);
  });
});
