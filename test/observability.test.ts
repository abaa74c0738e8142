import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import {
  MODEL,
  NIXL,
  rawPost,
  recorded,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';

/**
 * Coordinator observability end to end: real `motor sim` engines (direct mode, NIXL handoff), a
 * coordinator process with tracing to a loopback OTLP/HTTP collector, then /metrics, spans, the
 * traceparent each engine received, and the access log.
 */

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
}

/** A tiny OTLP/HTTP (JSON) collector: keeps every span it receives. */
class Collector {
  readonly spans: OtlpSpan[] = [];
  private waiters: Array<() => void> = [];
  server: Server;
  url = '';

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            resourceSpans?: { scopeSpans?: { spans?: OtlpSpan[] }[] }[];
          };
          for (const rs of body.resourceSpans ?? [])
            for (const ss of rs.scopeSpans ?? []) this.spans.push(...(ss.spans ?? []));
        } catch {
          // not JSON: ignored (the test then times out with a clear message)
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
        for (const w of this.waiters.splice(0)) w();
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/traces`;
  }

  /** Resolves once `pred` holds for the spans received so far (re-checked on each export). */
  async waitFor(pred: (spans: OtlpSpan[]) => boolean, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.spans)) {
      if (Date.now() > deadline) throw new Error(`spans not received; have ${JSON.stringify(this.spans)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 1_000);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

/** Prometheus text → Map of `name{labels}` → value. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

async function waitForLog(
  child: MotorChild,
  pred: (l: Record<string, unknown>) => boolean,
  timeoutMs = 30_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hit = child.logs.find(pred);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error('log line not seen');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const chat = (extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'Tell me about prefill and decode.' }],
  max_tokens: 6,
  ...extra,
});

describe('coordinator observability (metrics, tracing, access log)', () => {
  let prefill: MotorChild;
  let decode: MotorChild;
  let coord: CoordinatorHandle;
  const collector = new Collector();

  beforeAll(async () => {
    await collector.start();
    [prefill, decode] = await Promise.all([startSim({ role: 'prefill' }), startSim({ role: 'decode' })]);
    coord = await startCoordinatorProcess({
      instances: [
        {
          id: 'P',
          url: prefill.url,
          role: 'prefill',
          mode: 'direct',
          kvTransferConfig: NIXL,
          models: [MODEL],
        },
        { id: 'D', url: decode.url, role: 'decode', mode: 'direct', kvTransferConfig: NIXL, models: [MODEL] },
      ],
      observability: {
        tracing: { enabled: true, exporter: 'otlp-http', endpoint: collector.url, batchDelayMs: 100 },
      },
    });
  }, 180_000);

  afterAll(async () => {
    await stopAllSpawned();
    await new Promise((r) => collector.server.close(r));
  });

  it('/metrics counts requests, TTFT, ITL, prefill, handoff and decisions with bounded labels', async () => {
    for (const stream of [true, true, false]) {
      const r = await rawPost(coord.url, '/v1/chat/completions', chat({ stream }));
      expect(r.status).toBe(200);
    }
    const missing = await rawPost(coord.url, '/v1/chat/completions', chat({ model: 'no-such-model' }));
    expect(missing.status).toBeGreaterThanOrEqual(400);
    // refused by the gateway before dispatch: counted too
    const invalid = await rawPost(coord.url, '/v1/chat/completions', { model: MODEL, messages: [] });
    expect(invalid.status).toBe(400);
    expect((await fetch(`${coord.url}/v1/chat/completions`)).status).toBe(405);

    const res = await fetch(`${coord.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    const m = parseMetrics(text);
    const route = 'route="/v1/chat/completions"';
    expect(m.get(`motor_requests_total{${route},plan="handoff",outcome="ok"}`)).toBe(3);
    expect(m.get(`motor_request_duration_seconds_count{${route},plan="handoff"}`)).toBe(3);
    expect(m.get(`motor_ttft_seconds_count{${route},plan="handoff"}`)).toBe(2);
    expect(m.get(`motor_ttft_seconds_sum{${route},plan="handoff"}`)).toBeGreaterThan(0);
    expect(m.get('motor_inter_token_latency_seconds_count{plan="handoff"}')).toBe(2);
    expect(m.get('motor_prefill_duration_seconds_count{plan="handoff"}')).toBe(3);
    expect(m.get('motor_kv_handoff_duration_seconds_count{plan="handoff"}')).toBe(2);
    expect(m.get('motor_scheduling_decisions_total{kind="pd",plan="handoff"}')).toBe(3);
    expect(m.get('motor_stream_frames_total')).toBeGreaterThanOrEqual(2 * 6);
    expect(m.get('motor_requests_in_flight')).toBe(0);
    expect(m.get('motor_requests_queued')).toBe(0);
    expect(m.get('motor_instance_in_flight{instance="P",role="prefill"}')).toBe(0);
    expect(m.get('motor_instance_in_flight{instance="D",role="decode"}')).toBe(0);
    expect(m.get('motor_instance_routable{instance="D",role="decode"}')).toBe(1);
    expect(m.get('motor_instance_circuit_state{instance="P",state="closed"}')).toBe(1);
    expect(m.get('motor_instance_circuit_state{instance="P",state="open"}')).toBe(0);
    // the failed request is counted with a bounded outcome, and no attempt (plan none)
    const failed = [...m.entries()].filter(
      ([k]) => k.startsWith('motor_requests_total{') && !k.includes('outcome="ok"'),
    );
    expect(failed).toHaveLength(3);
    for (const [k] of failed) expect(k).toContain('plan="none"');
    expect(m.get(`motor_requests_total{${route},plan="none",outcome="invalid_request"}`)).toBe(1);
    expect(m.get(`motor_requests_total{${route},plan="none",outcome="method_not_allowed"}`)).toBe(1);

    // Cardinality: labels come from fixed sets and instance ids; never request ids or user input.
    expect(text).not.toContain('req-');
    expect(text).not.toContain('no-such-model');
    const motorSeries = [...m.keys()].filter((k) => k.startsWith('motor_'));
    expect(motorSeries.length).toBeLessThan(250);
    for (const k of motorSeries) {
      for (const [, v] of k.matchAll(/instance="([^"]*)"/g)) expect(['P', 'D']).toContain(v);
    }
  });

  it('spans per request and per leg; engines receive a traceparent continuing the caller trace', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const r = await rawPost(coord.url, '/v1/chat/completions', chat({ stream: true }), {
      traceparent: `00-${traceId}-${callerSpan}-01`,
    });
    expect(r.status).toBe(200);
    await collector.waitFor((spans) => spans.filter((s) => s.traceId === traceId).length >= 3, 60_000);
    const spans = collector.spans.filter((s) => s.traceId === traceId);
    const request = spans.find((s) => s.name === 'motor.request')!;
    expect(request).toBeDefined();
    expect(request.parentSpanId).toBe(callerSpan);
    const pLeg = spans.find((s) => s.name === 'motor.leg.prefill')!;
    const dLeg = spans.find((s) => s.name === 'motor.leg.decode')!;
    expect(pLeg.parentSpanId).toBe(request.spanId);
    expect(dLeg.parentSpanId).toBe(request.spanId);
    const instanceOf = (s: OtlpSpan) => s.attributes.find((a) => a.key === 'motor.instance')?.value;
    expect(instanceOf(pLeg)).toEqual({ stringValue: 'P' });
    expect(instanceOf(dLeg)).toEqual({ stringValue: 'D' });

    // each engine got the traceparent of its own leg span (same trace id)
    const [pRec, dRec] = await Promise.all([recorded(prefill), recorded(decode)]);
    const tp = (rec: typeof pRec) => rec.map((e) => e.headers.traceparent).filter(Boolean);
    expect(tp(pRec)).toContain(`00-${traceId}-${pLeg.spanId}-01`);
    expect(tp(dRec)).toContain(`00-${traceId}-${dLeg.spanId}-01`);
  });

  it('one access-log line per request with its id, status, plan, attempts, ttft and duration', async () => {
    const r = await rawPost(coord.url, '/v1/chat/completions', chat({ stream: true }));
    expect(r.status).toBe(200);
    const id = r.headers['x-request-id'];
    expect(typeof id).toBe('string');
    const line = await waitForLog(coord.child, (l) => l.msg === 'request' && l.root_request_id === id);
    expect(line).toMatchObject({ status: 200, plan: 'handoff', attempts: 1, outcome: 'ok', stream: true });
    expect(line.ttft_ms).toBeGreaterThan(0);
    expect(line.duration_ms).toBeGreaterThanOrEqual(line.ttft_ms as number);
    // a request span exists for it: the engines saw a traceparent with the logged trace id
    expect(line.trace_id).toMatch(/^[0-9a-f]{32}$/);
    const dRec = await recorded(decode);
    expect(dRec.some((e) => e.headers.traceparent?.includes(line.trace_id as string))).toBe(true);
    expect(coord.child.logs.filter((l) => l.msg === 'request' && l.root_request_id === id)).toHaveLength(1);
  });
});
