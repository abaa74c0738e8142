import { describe, expect, it } from 'vitest';
import { ManualClock } from '../common/clock.js';
import { EngineMetricsStore } from './engine-metrics.js';
import { LoadTracker } from './load-tracker.js';

describe('LoadTracker', () => {
  it('tracks in-flight requests, tokens and pending prefill; idempotent handles; idle entries dropped', () => {
    const t = new LoadTracker();
    const h1 = t.begin('a', { promptTokens: 100, cachedPromptTokens: 60 });
    const h2 = t.begin('a', { promptTokens: 50 });
    expect(t.get('a')).toEqual({ inflightRequests: 2, inflightTokens: 150, pendingPrefillTokens: 90 });
    h1.firstToken();
    h1.firstToken();
    expect(t.get('a').pendingPrefillTokens).toBe(50);
    h1.end('success');
    h1.end('success');
    expect(t.get('a')).toEqual({ inflightRequests: 1, inflightTokens: 50, pendingPrefillTokens: 50 });
    h2.end('failure'); // end without firstToken also clears pending
    h2.firstToken();
    expect(t.get('a')).toEqual({ inflightRequests: 0, inflightTokens: 0, pendingPrefillTokens: 0 });
    expect(t.snapshot().size).toBe(0);
  });
});

describe('EngineMetricsStore', () => {
  it('serves fresh snapshots, ignores stale and missing ones, counts and reports fallbacks once', () => {
    const clock = new ManualClock();
    const first: string[] = [];
    const m = new EngineMetricsStore({
      clock,
      staleAfterMs: 1000,
      onFirstFallback: (id, why) => first.push(`${id}:${why}`),
    });
    const snap = {
      num_requests_running: 1,
      num_requests_waiting: 2,
      kv_cache_usage_perc: 0.5,
      scraped_at_ms: clock.now(),
    };
    m.update('a', snap);
    expect(m.fresh('a')).toBe(snap);
    clock.advance(1001);
    expect(m.fresh('a')).toBeUndefined();
    expect(m.fresh('a')).toBeUndefined();
    expect(m.fresh('b')).toBeUndefined();
    expect(m.fallbacks).toEqual({ stale: 2, missing: 1 });
    expect(first).toEqual(['a:stale', 'b:missing']);
    m.update('a', { ...snap, scraped_at_ms: clock.now() - 5000 }); // out of order: ignored
    m.update('a', { ...snap, scraped_at_ms: clock.now() });
    expect(m.fresh('a')?.scraped_at_ms).toBe(clock.now());
  });
});
