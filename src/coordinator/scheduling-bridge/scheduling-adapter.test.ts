import { describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { parseEngineMetrics } from '../fleet/engine-metrics-scraper.js';
import { StaticInstanceSource, type Instance } from '../fleet/instance-source.js';
import { MotorError } from '../../common/motor-error.js';
import { renderPrompt } from '../kv-routing/prompt-render.js';
import { legOutcome, SchedulingAdapter } from './scheduling-adapter.js';
import { Upstreams } from '../fleet/upstream.js';

function adapterFor(instances: Record<string, unknown>[], scheduling: Record<string, unknown> = {}) {
  const config = validateCoordinatorConfig({ instances, scheduling: { seed: 1, ...scheduling } });
  const source = new StaticInstanceSource(config.instances);
  const upstreams = new Upstreams({ connectionsPerInstance: 1, keepAliveMs: 1000, connectMs: 1000 });
  const log = createLogger('test', 'silent');
  return { adapter: new SchedulingAdapter(config.scheduling, { source, upstreams, log }), source };
}

const H = { dispatchProfile: 'handoff' };
const chat = (content: string) => ({
  kind: 'chat' as const,
  body: { model: 'm', messages: [{ role: 'user', content }] },
  model: 'm',
  stream: false,
  wantsTokenIds: false,
});

describe('legOutcome', () => {
  const err = (code: ConstructorParameters<typeof MotorError>[0], opts = {}) =>
    new MotorError(code, 'x', opts);
  it.each([
    [null, 'success'],
    [err('engine_rejected', { instanceId: 'a', status: 400 }), 'client_error'],
    [err('engine_rejected', { instanceId: 'a', status: 413 }), 'client_error'],
    [err('engine_rejected', { instanceId: 'a', status: 422 }), 'client_error'],
    [err('engine_rejected', { instanceId: 'a', status: 404 }), 'client_error'],
    [err('upload_refused', { instanceId: 'a' }), 'cancelled'],
    [err('engine_error', { instanceId: 'a' }), 'failure'],
    [err('engine_unavailable', { instanceId: 'a', status: 429 }), 'failure'],
    [err('connection_error', { instanceId: 'a' }), 'failure'],
    [err('connection_error', { instanceId: 'b' }), 'cancelled'],
    [err('engine_error', { instanceId: 'a', stoppedByPeer: true }), 'cancelled'],
    [err('first_token_timeout'), 'failure'],
    [err('idle_timeout'), 'failure'],
    [err('client_disconnect'), 'cancelled'],
    [err('client_stalled'), 'cancelled'],
    [err('deadline_exceeded'), 'cancelled'],
    [err('instance_withdrawn', { instanceId: 'a' }), 'cancelled'],
  ] as const)('%s → %s', (e, outcome) => {
    expect(legOutcome('a', e)).toBe(outcome);
  });
});

describe('SchedulingAdapter', () => {
  it('selects capability-compatible pairs, avoids excluded instances unless only they can serve', () => {
    const { adapter, source } = adapterFor(
      [
        { id: 'P0', url: 'http://p0:1', role: 'prefill', models: ['m'], ...H },
        { id: 'P1', url: 'http://p1:1', role: 'prefill', models: ['m'], ...H },
        { id: 'D0', url: 'http://d0:1', role: 'decode', models: ['m'], ...H },
      ],
      { policy: 'round-robin' },
    );
    const req = adapter.requestFor(chat('hello'), {});
    for (let i = 0; i < 4; i++) {
      const s = adapter.select(source.routable(), req, new Set(['P0']));
      expect(s.route.kind === 'pd' && s.route.prefill.id).toBe('P1');
      expect(s.picked.map((x) => x.id)).toEqual(['P1', 'D0']);
    }
    const only = adapter.select(source.routable(), req, new Set(['D0']));
    expect(only.route.kind === 'pd' && only.route.decode.id).toBe('D0');
    expect(() => adapter.select(source.routable(), { ...req, model: 'nope' }, new Set())).toThrow(
      /does not exist/,
    );
  });

  it('opens a circuit after failed legs and routes around it; 4xx legs do not count', () => {
    const { adapter, source } = adapterFor(
      [
        { id: 'P0', url: 'http://p0:1', role: 'prefill', ...H },
        { id: 'P1', url: 'http://p1:1', role: 'prefill', ...H },
        { id: 'D0', url: 'http://d0:1', role: 'decode', ...H },
      ],
      { policy: 'round-robin', circuitBreaker: { failureThreshold: 2 } },
    );
    const p0 = source.routable().find((i) => i.id === 'P0') as Instance;
    const req = adapter.requestFor(chat('hello'), {});
    const fail = new MotorError('engine_error', 'boom', { instanceId: 'P0' });
    const rejected = new MotorError('engine_rejected', 'bad', { instanceId: 'P0', status: 400 });
    adapter.beginLeg(p0, 'prefill', req, 0).end(fail);
    adapter.beginLeg(p0, 'prefill', req, 0).end(rejected); // resets the streak
    adapter.beginLeg(p0, 'prefill', req, 0).end(fail);
    expect(adapter.scheduler.breakers.state('P0')).toBe('closed');
    adapter.beginLeg(p0, 'prefill', req, 0).end(fail);
    expect(adapter.scheduler.breakers.state('P0')).toBe('open');
    for (let i = 0; i < 4; i++) {
      const s = adapter.select(source.routable(), req, new Set());
      expect(s.route.kind === 'pd' && s.route.prefill.id).toBe('P1');
    }
  });

  it.each([
    ['Qwen3-0.6B', /served models: Qwen\/Qwen3-0\.6B, other; did you mean 'Qwen\/Qwen3-0\.6B'\?$/],
    ['llama', /served models: Qwen\/Qwen3-0\.6B, other$/],
  ])('a model 404 for %s lists the served models', (model, message) => {
    const { adapter, source } = adapterFor([
      { id: 'P', url: 'http://p:1', role: 'prefill', models: ['Qwen/Qwen3-0.6B'], ...H },
      { id: 'D', url: 'http://d:1', role: 'decode', models: ['Qwen/Qwen3-0.6B', 'other'], ...H },
    ]);
    const req = { ...adapter.requestFor(chat('x'), {}), model };
    const error = (() => {
      try {
        adapter.select(source.routable(), req, new Set());
      } catch (err) {
        return err as MotorError;
      }
    })();
    expect(error?.code).toBe('model_not_found');
    expect(error?.message).toMatch(message);
  });

  it('an empty fleet is a 503 naming the cause, not "retry shortly"', () => {
    const { adapter, source } = adapterFor([]);
    expect(() => adapter.select(source.routable(), adapter.requestFor(chat('x'), {}), new Set())).toThrow(
      /^no route for model '[^']+': no instance is registered \(none in the config, and no engine proxy has registered\)$/,
    );
  });

  it('names the missing capability of an incompatible fleet', () => {
    const { adapter, source } = adapterFor([
      { id: 'P', url: 'http://p:1', role: 'prefill', dispatchProfile: 'handoff' },
      { id: 'D', url: 'http://d:1', role: 'decode', dispatchProfile: 'trigger' },
    ]);
    expect(() => adapter.select(source.routable(), adapter.requestFor(chat('x'), {}), new Set())).toThrow(
      /missing capability: .*prefill_handoff_decode/,
    );
  });

  it('tracks load per leg: decode legs hold no pending prefill; end is idempotent', () => {
    const { adapter, source } = adapterFor([
      { id: 'P', url: 'http://p:1', role: 'prefill', ...H },
      { id: 'D', url: 'http://d:1', role: 'decode', ...H },
    ]);
    const [p, d] = source.routable() as Instance[];
    const req = { ...adapter.requestFor(chat('x'.repeat(400)), {}) };
    const pl = adapter.beginLeg(p!, 'prefill', req, 40);
    const dl = adapter.beginLeg(d!, 'decode', req, 40);
    expect(adapter.scheduler.loadTracker.get('P')).toMatchObject({
      inflightRequests: 1,
      pendingPrefillTokens: req.promptTokens - 40,
    });
    expect(adapter.scheduler.loadTracker.get('D')).toMatchObject({
      inflightRequests: 1,
      pendingPrefillTokens: 0,
    });
    pl.firstToken();
    expect(adapter.scheduler.loadTracker.get('P').pendingPrefillTokens).toBe(0);
    pl.end(null);
    pl.end(null);
    dl.end(null);
    expect(adapter.scheduler.loadTracker.get('P').inflightRequests).toBe(0);
  });
});

describe('renderPrompt', () => {
  it('renders the whole conversation so the next turn extends the previous rendering', () => {
    const turn1 = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hi' },
    ];
    const turn2 = [
      ...turn1,
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: [{ type: 'text', text: 'more' }] },
    ];
    const joined = (messages: unknown[]): string =>
      (renderPrompt({ kind: 'chat', body: { messages } }).text as string[]).join('');
    const a = joined(turn1);
    const b = joined(turn2);
    expect(b.startsWith(a)).toBe(true);
    expect(b).toContain('<|user|>\nmore\n');
  });
  it.each([
    ['text', { role: 'user', content: 'hi' }, '<|user|>\nhi\n'],
    ['a name', { role: 'user', name: 'ann', content: 'hi' }, '<|user|>(ann)\nhi\n'],
    [
      'text parts',
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'x' }] },
      '<|user|>\na{"type":"x"}\n',
    ],
    ['no content', { role: 'assistant', content: null }, '<|assistant|>\n\n'],
    [
      'tool calls',
      { role: 'assistant', content: '', tool_calls: [{ id: 't' }] },
      '<|assistant|>\n\n[{"id":"t"}]\n',
    ],
  ])('chat, %s: the fixed template', (_name, message, expected) => {
    const r = renderPrompt({ kind: 'chat', body: { messages: [message] } });
    expect((r.text as string[]).join('')).toBe(expected);
    expect(r.tokens).toBe(Math.ceil(expected.length / 4));
  });
  it('chat: pieces are the parsed message strings themselves (no flattened copy of the conversation)', () => {
    const content = 'x'.repeat(10_000);
    const r = renderPrompt({ kind: 'chat', body: { messages: [{ role: 'user', content }] } });
    expect(Array.isArray(r.text)).toBe(true);
    expect((r.text as string[]).some((piece) => piece === content)).toBe(true);
    expect(r.tokens).toBe(Math.ceil((content.length + 10) / 4));
  });
  it('completions: text, or token ids', () => {
    expect(renderPrompt({ kind: 'completion', body: { prompt: 'abcdefgh' } })).toEqual({
      text: 'abcdefgh',
      tokens: 2,
    });
    expect(renderPrompt({ kind: 'completion', body: { prompt: [1, 2, 3] } })).toEqual({
      tokenIds: [1, 2, 3],
      tokens: 3,
    });
  });
});

describe('parseEngineMetrics', () => {
  it('reads the vLLM series (labels, sums, legacy KV name) and null without any', () => {
    const text = [
      '# HELP vllm:num_requests_running x',
      'vllm:num_requests_running{model_name="m"} 3',
      'vllm:num_requests_waiting{model_name="m"} 2',
      'vllm:num_requests_waiting{model_name="n"} 1',
      'vllm:gpu_cache_usage_perc{model_name="m"} 0.5',
      'vllm:prompt_tokens_total 99',
    ].join('\n');
    expect(parseEngineMetrics(text, 7)).toEqual({
      num_requests_running: 3,
      num_requests_waiting: 3,
      kv_cache_usage_perc: 0.5,
      scraped_at_ms: 7,
    });
    expect(
      parseEngineMetrics('vllm:kv_cache_usage_perc 0.25\nvllm:gpu_cache_usage_perc 0.9', 1)
        ?.kv_cache_usage_perc,
    ).toBe(0.25);
    expect(parseEngineMetrics('motor_proxy_stops_total 1', 1)).toBeNull();
  });
});

describe('route selection through the scheduler (conformance 12–16)', () => {
  const T = { dispatchProfile: 'trigger' };
  const S = { engine: 'sglang' };
  const N = {};
  const fleet = (...specs: Array<[string, Record<string, unknown>]>) =>
    specs.map(([role, extra], i) => ({ id: `${role[0]}${i}`, url: `http://h${i}:1`, role, ...extra }));
  const route = (specs: Record<string, unknown>[], fallbackToSingle: boolean): string => {
    const config = validateCoordinatorConfig({
      instances: specs,
      dispatch: { fallbackToSingle },
      scheduling: { seed: 1 },
    });
    const source = new StaticInstanceSource(config.instances);
    const upstreams = new Upstreams({ connectionsPerInstance: 1, keepAliveMs: 1000, connectMs: 1000 });
    const adapter = new SchedulingAdapter(config.scheduling, {
      source,
      upstreams,
      log: createLogger('test', 'silent'),
    });
    try {
      const { route: r } = adapter.select(source.routable(), adapter.requestFor(chat('q'), {}), new Set());
      return r.kind === 'pd'
        ? `pd ${r.flow} ${r.prefill.id}->${r.decode.id}`
        : `single ${r.instance.id}${r.degraded ? ' degraded' : ''}`;
    } catch (err) {
      if (err instanceof MotorError) return `${err.status} ${err.message}`;
      throw err;
    }
  };
  it.each<[string, Record<string, unknown>[], boolean, string]>([
    ['12 P+D handoff', fleet(['prefill', H], ['decode', H]), false, 'pd handoff p0->d1'],
    ['12 P+D trigger', fleet(['prefill', T], ['decode', T]), false, 'pd trigger p0->d1'],
    ['12 P+D sglang bootstrap', fleet(['prefill', S], ['decode', S]), false, 'pd bootstrap p0->d1'],
    ['13 only U', fleet(['union', N]), false, 'single u0'],
    ['14 no shared plan, no U', fleet(['prefill', H], ['decode', T]), true, '503 no route'],
    ['14 no shared plan, U, fallback', fleet(['prefill', H], ['decode', T], ['union', N]), true, 'single u2'],
    ['14 no shared plan, U, no fallback', fleet(['prefill', H], ['decode', T], ['union', N]), false, '503'],
    [
      '14 unknown profile fails closed',
      fleet(['prefill', N], ['decode', H]),
      false,
      'prefill instances advertise no dispatch plan',
    ],
    ['15 only P, fallback', fleet(['prefill', H]), true, 'single p0 degraded'],
    ['15 only P, no fallback', fleet(['prefill', H]), false, '503 no route'],
    [
      '16 mixed fleet pairs compatibly',
      fleet(['prefill', H], ['decode', T], ['prefill', T]),
      false,
      'pd trigger p2->d1',
    ],
    [
      '16 mixed fleet pairs compatibly (2)',
      fleet(['prefill', T], ['decode', H], ['decode', N], ['prefill', H]),
      false,
      'pd handoff p3->d1',
    ],
  ])('%s', (_name, specs, fallback, expected) => {
    for (let i = 0; i < 5; i++) expect(route(specs, fallback)).toContain(expected);
  });
});
