import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { stopResultOf } from './dispatch-observer.js';
import { countFrames, Observability } from './observability.js';
import { RecentRequests, type RequestSummary } from './recent-requests.js';

const silent = pino({ level: 'silent' });

describe('countFrames', () => {
  it.each([
    ['', 0],
    ['data: {"a":1}\n\n', 1],
    ['data: 1\n\ndata: 2\n\ndata: [DONE]\n\n', 3],
    ['data: partial', 0],
    ['data: 1\n\ndata: 2', 1],
    ['data: a\ndata: b\n\n', 1],
    ['\n\n\n\n', 2],
  ])('%j → %i', (text, n) => {
    expect(countFrames(Buffer.from(text))).toBe(n);
  });
});

describe('stopResultOf', () => {
  it.each([
    [{ error: 'ECONNREFUSED' }, 'error'],
    [{ status: 500, text: '' }, 'http_error'],
    [{ status: 200, text: '{"state":"stopped"}' }, 'stopped'],
    [{ status: 200, text: '{"state":"already_done"}' }, 'already_done'],
    [{ status: 200, text: '{"state":"whatever-the-engine-says"}' }, 'invalid'],
    [{ status: 200, text: 'not json' }, 'invalid'],
  ])('%j → %s', (r, label) => {
    expect(stopResultOf(r)).toBe(label);
  });
});

const summary = (i: number, extra: Partial<RequestSummary> = {}): RequestSummary => ({
  id: `req-${i}`,
  route: '/v1/chat/completions',
  model: 'm',
  stream: true,
  status: 200,
  outcome: 'ok',
  plan: 'handoff',
  attempts: 1,
  startedAt: 0,
  endedAt: 1_000_000 + i,
  durationMs: i,
  ttftMs: i / 2,
  frames: 3,
  migrations: 0,
  legs: [],
  ...extra,
});

describe('RecentRequests', () => {
  it('keeps the last `capacity` summaries, newest first', () => {
    const r = new RecentRequests(3, 8);
    for (let i = 1; i <= 5; i++) r.add(summary(i));
    expect(r.list().map((s) => s.id)).toEqual(['req-5', 'req-4', 'req-3']);
    expect(r.list(2)).toHaveLength(2);
    expect(r.total).toBe(5);
  });

  it('window: rate, errors and percentiles over the samples inside the window only', () => {
    const r = new RecentRequests(10, 1000);
    const now = 2_000_000;
    for (let i = 1; i <= 100; i++) r.add(summary(i, { endedAt: now - 500 }));
    r.add(summary(1000, { endedAt: now - 120_000 })); // outside
    r.add(summary(7, { endedAt: now - 100, outcome: 'engine_error', ttftMs: null }));
    const w = r.window(now, 60);
    expect(w.requests).toBe(101);
    expect(w.errors).toBe(1);
    expect(w.requestsPerSecond).toBeCloseTo(101 / 60);
    expect(w.durationMs!.p50).toBe(50);
    expect(w.durationMs!.p99).toBe(99);
    expect(w.ttftMs!.p90).toBe(45);
    expect(w.perSecond).toHaveLength(60);
    expect(w.perSecond[59]).toBe(101);
    expect(r.errorsTotal).toBe(1);
  });

  it.each([
    ['client_disconnect', 0, 1],
    ['engine_error', 1, 0],
    ['ok', 0, 0],
  ])('a request ending %s: %i errors, %i client hang-ups', (outcome, errors, gone) => {
    const r = new RecentRequests(10, 100);
    r.add(summary(1, { endedAt: 1000, outcome }));
    expect(r.window(1000, 60)).toMatchObject({ errors, clientDisconnected: gone });
    expect([r.errorsTotal, r.clientDisconnectedTotal]).toEqual([errors, gone]);
  });

  it('sample memory is fixed: old samples are overwritten', () => {
    const r = new RecentRequests(0, 4);
    for (let i = 1; i <= 10; i++) r.add(summary(i, { endedAt: 1000 }));
    expect(r.window(1000, 60).requests).toBe(4);
    expect(r.list()).toEqual([]);
  });
});

describe('Observability (in process)', () => {
  const make = () =>
    Observability.create(
      silent,
      {
        instances: () => [
          { id: 'P', role: 'prefill', url: 'http://p', inFlight: 2, routable: true },
          { id: 'D', role: 'decode', url: 'http://d', inFlight: 0, routable: false },
        ],
        circuitStates: () => [{ instanceId: 'D', state: 'open' }],
        queuedRequests: () => 3,
        inflightBodyBytes: () => 4096,
      },
      { defaultMetrics: false, accessLog: false },
    );

  const metricsOf = async (o: Observability): Promise<string> => (await o.metrics.render()).body;

  it('a retried P/D stream request: decisions, retries, stops, handoff, TTFT, outcome ok', async () => {
    const o = make();
    const req = o.requestStart({
      rootRequestId: 'req-x',
      path: '/v1/chat/completions',
      model: 'user-chosen-model',
      stream: true,
      headers: {},
    });
    expect(o.inFlightRequests()).toBe(1);
    req.attempt(1, { kind: 'pd', flow: 'handoff', prefillId: 'P', decodeId: 'D' });
    const headers: Record<string, string> = {};
    const p1 = req.legStart('prefill', 'P', headers);
    expect(headers.traceparent).toBeUndefined(); // tracing off, no incoming traceparent
    req.attemptFailed('connection_error', 'peer_failed');
    req.stopResult('peer_failed', 'not_found');
    p1.end('connection_error');
    req.retry(1, 'connection_error');
    req.attempt(2, { kind: 'pd', flow: 'handoff', prefillId: 'P', decodeId: 'D' });
    const p2 = req.legStart('prefill', 'P', {});
    p2.end(null);
    const d2 = req.legStart('decode', 'D', {});
    req.chunk(Buffer.from('data: 1\n\ndata: 2\n\n'));
    d2.firstByte();
    req.committed();
    req.chunk(Buffer.from('data: 3\n\n'));
    d2.end(null);
    req.end(200, 'connection_error');
    const text = await metricsOf(o);
    expect(text).toContain(
      'motor_requests_total{route="/v1/chat/completions",plan="handoff",outcome="ok"} 1',
    );
    expect(text).toContain('motor_scheduling_decisions_total{kind="pd",plan="handoff"} 2');
    expect(text).toContain('motor_retries_total{code="connection_error"} 1');
    expect(text).toContain('motor_stops_total{reason="peer_failed",result="not_found"} 1');
    expect(text).toContain('motor_prefill_duration_seconds_count{plan="handoff"} 1');
    expect(text).toContain('motor_kv_handoff_duration_seconds_count{plan="handoff"} 1');
    expect(text).toContain('motor_inter_token_latency_seconds_count{plan="handoff"} 1');
    expect(text).toContain('motor_stream_frames_total 3');
    expect(text).toContain('motor_requests_queued 3');
    expect(text).toContain('motor_request_body_bytes_in_flight 4096');
    expect(text).toContain('motor_instance_in_flight{instance="P",role="prefill"} 2');
    expect(text).toContain('motor_instance_routable{instance="D",role="decode"} 0');
    expect(text).toContain('motor_instance_circuit_state{instance="D",state="open"} 1');
    expect(text).not.toContain('req-x');
    expect(text).not.toContain('user-chosen-model');
    expect(o.inFlightRequests()).toBe(0);
    const [s] = o.recent.list();
    expect(s).toMatchObject({ id: 'req-x', attempts: 2, outcome: 'ok', frames: 3 });
    expect(s!.legs.map((l) => [l.attempt, l.role, l.error])).toEqual([
      [1, 'prefill', 'connection_error'],
      [2, 'prefill', null],
      [2, 'decode', null],
    ]);
  });

  it('a migrated stream: migrations by reason and outcome, the resume time, outcome ok', async () => {
    const o = make();
    const req = o.requestStart({
      rootRequestId: 'r',
      path: '/v1/chat/completions',
      model: 'm',
      stream: true,
      headers: {},
    });
    req.attempt(1, { kind: 'single', flow: 'single', prefillId: null, decodeId: 'D' });
    req.legStart('single', 'D', {});
    req.committed();
    req.attemptFailed('connection_error', 'peer_failed');
    req.migration!('connection_error', 'started');
    req.attempt(2, { kind: 'single', flow: 'single', prefillId: null, decodeId: 'D' });
    req.legStart('single', 'D2', {});
    req.migration!('connection_error', 'resumed');
    req.migrationResumed!(0.02);
    req.migration!('made_up_code', 'refused');
    req.end(200, 'connection_error');
    const text = await metricsOf(o);
    expect(text).toContain('motor_migrations_total{reason="connection_error",outcome="started"} 1');
    expect(text).toContain('motor_migrations_total{reason="connection_error",outcome="resumed"} 1');
    expect(text).toContain('motor_migrations_total{reason="other",outcome="refused"} 1'); // bounded
    expect(text).toContain('motor_migration_resume_seconds_bucket{le="0.025"} 1');
    expect(text).toContain('motor_requests_total{route="/v1/chat/completions",plan="single",outcome="ok"} 1');
    // the dashboard's recent requests mark the continuation's legs
    const [s] = o.recent.list();
    expect(s!.migrations).toBe(1);
    expect(s!.legs.map((l) => [l.instance, l.migration])).toEqual([
      ['D', 0],
      ['D2', 1],
    ]);
  });

  it('failures after commit, failures without an attempt, unknown codes and routes stay bounded', async () => {
    const o = make();
    const a = o.requestStart({
      rootRequestId: 'a',
      path: '/v1/completions',
      model: 'm',
      stream: true,
      headers: {},
    });
    a.attempt(1, { kind: 'single', flow: 'single_degraded', prefillId: null, decodeId: 'D' });
    a.legStart('single', 'D', {}).firstByte();
    a.attemptFailed('idle_timeout', 'timeout');
    a.end(200, null);
    const b = o.requestStart({
      rootRequestId: 'b',
      path: '/v1/evil/<path>',
      model: 'm',
      stream: false,
      headers: {},
    });
    b.end(503, 'something-unknown');
    const c = o.requestStart({
      rootRequestId: 'c',
      path: '/v1/completions',
      model: 'm',
      stream: false,
      headers: {},
    });
    c.end(404, 'model_not_found');
    a.end(200, null); // idempotent
    const text = await metricsOf(o);
    expect(text).toContain(
      'motor_requests_total{route="/v1/completions",plan="single_degraded",outcome="idle_timeout"} 1',
    );
    expect(text).toContain('motor_requests_total{route="other",plan="none",outcome="other"} 1');
    expect(text).toContain(
      'motor_requests_total{route="/v1/completions",plan="none",outcome="model_not_found"} 1',
    );
    expect(text).toContain('motor_scheduling_decisions_total{kind="single",plan="single_degraded"} 1');
    expect(text).toContain('motor_attempt_failures_total{code="idle_timeout",reason="timeout"} 1');
    expect(o.recent.total).toBe(3);
  });

  it('with tracing off, an incoming traceparent is forwarded to every leg', () => {
    const o = make();
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const req = o.requestStart({
      rootRequestId: 'r',
      path: '/v1/chat/completions',
      model: 'm',
      stream: false,
      headers: { traceparent: tp, tracestate: 'k=v' },
    });
    const headers: Record<string, string> = { 'x-request-id': 'r#a1' };
    req.legStart('single', 'D', headers);
    expect(headers).toEqual({ 'x-request-id': 'r#a1', traceparent: tp, tracestate: 'k=v' });
  });

  // Issue 15 finding 10: an 8 KB junk traceparent used to reach every engine.
  const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  it.each([
    ['junk', 'x'.repeat(8192), 'k=v', {}],
    ['upper-case hex', TP.toUpperCase(), undefined, {}],
    ['zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, undefined, {}],
    ['version ff', `ff${TP.slice(2)}`, undefined, {}],
    ['oversized tracestate dropped alone', TP, 'k=' + 'v'.repeat(600), { traceparent: TP }],
    ['well-formed pair kept', TP, 'k=v', { traceparent: TP, tracestate: 'k=v' }],
  ])('with tracing off, a %s trace context: forwarded only when well-formed', (_n, tp, ts, want) => {
    const req = make().requestStart({
      rootRequestId: 'r',
      path: '/v1/chat/completions',
      model: 'm',
      stream: false,
      headers: { traceparent: tp, ...(ts !== undefined ? { tracestate: ts } : {}) },
    });
    const headers: Record<string, string> = { 'x-request-id': 'r#a1' };
    req.legStart('single', 'D', headers);
    expect(headers).toEqual({ 'x-request-id': 'r#a1', ...want });
  });
});
