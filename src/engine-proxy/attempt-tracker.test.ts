import { describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import { AttemptTracker } from './attempt-tracker.js';

const d = { root_request_id: 'r', attempt_seq: 1, pair_id: 'p', engine_request_id: 'r#a1' };
const stopReq = (over: Partial<typeof d> = {}) => ({ ...d, ...over });

function tracker(over: Partial<ConstructorParameters<typeof AttemptTracker>[0]> = {}) {
  const clock = new ManualClock(1_000);
  const tr = new AttemptTracker({ ttlMs: 100, maxFinished: 3, maxActive: 2, clock, ...over });
  return { tr, clock };
}

describe('AttemptTracker (conformance 29)', () => {
  it('stop on an active attempt aborts it, then answers already_stopped', () => {
    const { tr } = tracker();
    const begun = tr.begin(d);
    expect(begun.ok).toBe(true);
    if (!begun.ok) return;
    const aborted: string[] = [];
    begun.handle.onAbort((r) => aborted.push(r));
    expect(tr.stop(stopReq(), 'client_disconnect').state).toBe('stopped');
    expect(aborted).toEqual(['client_disconnect']);
    expect(begun.handle.stopReason).toBe('client_disconnect');
    expect(tr.stop(stopReq(), 'client_disconnect').state).toBe('already_stopped');
    begun.handle.finish('done'); // late completion does not resurrect it
    expect(tr.stateOf('r', 1)).toBe('stopped');
  });

  it.each([
    ['wrong pair', { pair_id: 'q' }],
    ['wrong engine request id', { engine_request_id: 'r#a9' }],
  ])('%s → stale, nothing aborted', (_name, over) => {
    const { tr } = tracker();
    const begun = tr.begin(d);
    let aborted = false;
    if (begun.ok) begun.handle.onAbort(() => (aborted = true));
    expect(tr.stop(stopReq(over), 'other').state).toBe('stale');
    expect(aborted).toBe(false);
    expect(tr.stateOf('r', 1)).toBe('active');
  });

  it('a stop without engine_request_id matches on pair id', () => {
    const { tr } = tracker();
    tr.begin(d);
    expect(tr.stop({ ...d, engine_request_id: null }, 'other').state).toBe('stopped');
  });

  it('stop after completion → already_done', () => {
    const { tr } = tracker();
    const begun = tr.begin(d);
    if (begun.ok) begun.handle.finish('done');
    expect(tr.stop(stopReq(), 'timeout').state).toBe('already_done');
  });

  it('unknown → not_found and a tombstone refuses the late request; a second stop → already_stopped', () => {
    const { tr } = tracker();
    expect(tr.stop(stopReq(), 'peer_failed').state).toBe('not_found');
    const late = tr.begin(d);
    expect(late).toMatchObject({ ok: false, status: 409, code: 'dispatch_stopped' });
    expect(!late.ok && late.message).toMatch(/stopped \(peer_failed\) before it arrived/);
    expect(tr.stop(stopReq(), 'peer_failed').state).toBe('already_stopped');
  });

  it('a tombstone of another pair does not block a new pair', () => {
    const { tr } = tracker();
    tr.stop(stopReq({ pair_id: 'old' }), 'other');
    expect(tr.begin(d).ok).toBe(true);
  });

  it('refuses a duplicate in-flight attempt and a replay of a finished one', () => {
    const { tr } = tracker();
    const first = tr.begin(d);
    expect(tr.begin(d)).toMatchObject({ ok: false, code: 'attempt_in_flight' });
    if (first.ok) first.handle.finish('done');
    expect(tr.begin(d)).toMatchObject({ ok: false, code: 'attempt_finished' });
  });

  it('bounds in-flight attempts', () => {
    const { tr } = tracker();
    tr.begin({ ...d, root_request_id: 'a' });
    tr.begin({ ...d, root_request_id: 'b' });
    expect(tr.begin({ ...d, root_request_id: 'c' })).toMatchObject({ ok: false, status: 503 });
  });

  it('finished entries and tombstones expire after the TTL and are capped in number', () => {
    const { tr, clock } = tracker();
    for (let i = 0; i < 10; i++) tr.stop({ ...d, root_request_id: `x${i}` }, 'other');
    expect(tr.finishedCount).toBe(3); // maxFinished
    expect(tr.stateOf('x9', 1)).toBe('tombstone');
    expect(tr.stateOf('x0', 1)).toBeNull();
    clock.advance(101);
    tr.sweep();
    expect(tr.finishedCount).toBe(0);
    expect(tr.begin({ ...d, root_request_id: 'x9' }).ok).toBe(true); // tombstone gone
  });

  it('onAbort after a stop runs at once', () => {
    const { tr } = tracker();
    const begun = tr.begin(d);
    tr.stop(stopReq(), 'timeout');
    let reason = '';
    if (begun.ok) begun.handle.onAbort((r) => (reason = r));
    expect(reason).toBe('timeout');
  });
});
