import { connect } from 'node:net';
import fc from 'fast-check';
import { MODEL } from './e2e-cluster.js';

/** The seeded request generator and raw sender of test/fuzz.test.ts (also usable from a script to replay one case). */

export const MARK = 'FUZZ-INJECTED-MARK';
export const MAX_BODY = 256 * 1024;

export interface Case {
  kind: string;
  method: string;
  path: string;
  headers: Array<[string, string]>;
  body: string;
  /** Raw bytes instead of a generated request (header/framing tricks). */
  raw?: string;
}

export const INTERNAL_KEYS = [
  '_motor_dispatch',
  '_motor_prefill_result',
  '_motor_anything',
  'kv_transfer_params',
  'bootstrap_host',
  'bootstrap_port',
  'bootstrap_room',
];

/** `"_motor_dispatch"` spelled with JSON escapes, so a byte search for `"_motor_` misses it. */
export const escapeKey = (key: string, how: number): string =>
  how === 0
    ? key.replace('_', '\\u005f')
    : how === 1
      ? key.replace('m', '\\u006d')
      : [...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

export const validBase = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'fuzz' }],
  max_tokens: 2,
  ...extra,
});

const anyJson = fc.jsonValue({ maxDepth: 3 });
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom(
    '',
    '\u0000',
    '\ud800',
    '../../etc/passwd',
    '<script>',
    '%00',
    '${jndi:x}',
    '\r\nX-Evil: 1',
  ),
);
const field = fc.constantFrom(
  'model',
  'messages',
  'prompt',
  'stream',
  'max_tokens',
  'max_completion_tokens',
  'min_tokens',
  'n',
  'temperature',
  'top_p',
  'stop',
  'stream_options',
  'seed',
  'user',
  'return_token_ids',
  'logprobs',
  'tools',
);

const routes = fc.constantFrom('/v1/chat/completions', '/v1/completions');

export const caseArb: fc.Arbitrary<Case> = fc.oneof(
  // bad JSON
  fc.record({
    kind: fc.constant('bad-json'),
    method: fc.constant('POST'),
    path: routes,
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.tuple(fc.constant(JSON.stringify(validBase())), fc.nat()).map(([s, n]) => s.slice(0, n % s.length)),
      fc.constantFrom(
        '{',
        '{"model":',
        'null',
        '[]',
        '"x"',
        '1e999999',
        '{"a":1}}',
        '\ufeff{}',
        '{"model":"m",}',
      ),
    ),
  }),
  // wrong types
  fc.record({
    kind: fc.constant('wrong-type'),
    method: fc.constant('POST'),
    path: routes,
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc
      .tuple(fc.dictionary(field, anyJson, { maxKeys: 4 }), fc.boolean())
      .map(([d, keepBase]) =>
        JSON.stringify(keepBase ? { ...validBase(), ...d, max_tokens: 2 } : { ...validBase(), ...d }),
      ),
  }),
  // hostile values in valid-looking bodies (go through to the engine)
  fc.record({
    kind: fc.constant('hostile-values'),
    method: fc.constant('POST'),
    path: fc.constant('/v1/chat/completions'),
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc
      .tuple(hostileString, fc.boolean(), fc.dictionary(hostileString, anyJson, { maxKeys: 3 }))
      .map(([s, stream, extra]) => {
        const body: Record<string, unknown> = { ...extra, ...validBase({ stream }) };
        (body.messages as Array<Record<string, unknown>>)[0]!.content = s;
        for (const k of Object.keys(body)) if (INTERNAL_KEYS.some((i) => k.startsWith(i))) delete body[k];
        return JSON.stringify(body);
      }),
  }),
  // injected internal fields, plain or with JSON-escaped keys
  fc.record({
    kind: fc.constant('internal-field'),
    method: fc.constant('POST'),
    path: routes,
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc
      .tuple(fc.constantFrom(...INTERNAL_KEYS), fc.integer({ min: -1, max: 2 }), anyJson, fc.boolean())
      .map(([key, how, value, completions]) => {
        const base = completions ? { model: MODEL, prompt: 'fuzz', max_tokens: 2 } : validBase();
        const json = JSON.stringify({ ...base, [key]: { mark: MARK, value } });
        return how < 0 ? json : json.replace(`"${key}"`, `"${escapeKey(key, how)}"`);
      }),
  }),
  // deep nesting
  fc.record({
    kind: fc.constant('deep-nesting'),
    method: fc.constant('POST'),
    path: routes,
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc
      .tuple(fc.integer({ min: 100, max: 60_000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
      .map(([depth, open, inside]) => {
        const close = open === '[' ? ']' : '}';
        const deep = open.repeat(depth) + '1' + close.repeat(depth);
        return inside ? JSON.stringify(validBase()).replace(/}$/, `,"deep":${deep}}`) : deep;
      }),
  }),
  // huge fields (bounded: at most ~2 × MAX_BODY)
  fc.record({
    kind: fc.constant('huge-field'),
    method: fc.constant('POST'),
    path: routes,
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc
      .tuple(fc.integer({ min: 10_000, max: 2 * MAX_BODY }), fc.constantFrom('content', 'model', 'key'))
      .map(([n, where]) => {
        const big = 'x'.repeat(n);
        if (where === 'content')
          return JSON.stringify(validBase({ messages: [{ role: 'user', content: big }] }));
        if (where === 'model') return JSON.stringify(validBase({ model: big }));
        return JSON.stringify(validBase({ [big]: 1 }));
      }),
  }),
  // path tricks
  fc.record({
    kind: fc.constant('path'),
    method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH'),
    path: fc.oneof(
      fc.constantFrom(
        '//v1/chat/completions',
        '/v1/chat/completions/',
        '/v1/chat/completions?x=1&x=2',
        '/v1/chat/completions#frag',
        '/v1/../v1/chat/completions',
        '/v1/%2e%2e/debug/faults',
        '/V1/CHAT/COMPLETIONS',
        '/v1/chat/completions%00',
        '/debug/faults',
        '/debug/recorded',
        '/v1/dispatch/stop',
        '/v1/metaserver',
        '/internal/kv/release',
        '/management/instances',
        '*',
        '/' + 'a'.repeat(8_000),
        'http://evil.example/v1/chat/completions',
      ),
      fc.string({ maxLength: 60 }).map((s) => '/' + encodeURIComponent(s)),
    ),
    headers: fc.constant([['content-type', 'application/json']] as Array<[string, string]>),
    body: fc.constantFrom('', JSON.stringify(validBase()), '{}'),
  }),
  // header tricks (raw framing)
  fc
    .tuple(
      fc.constantFrom(
        'content-type',
        'content-length',
        'transfer-encoding',
        'x-request-id',
        'authorization',
        'host',
        'expect',
        'connection',
        'huge',
        'dup-length',
      ),
      hostileString,
      fc.boolean(),
    )
    .map(([trick, s, stream]): Case => {
      const body = JSON.stringify(validBase({ stream }));
      const len = Buffer.byteLength(body);
      const head = (lines: string[]): string =>
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n${lines.join('\r\n')}\r\n\r\n`;
      const safe = s.replace(/[\r\n\0]/g, '');
      const raw: Record<string, string> = {
        'content-type': head([`content-type: ${safe || 'text/plain'}`, `content-length: ${len}`]) + body,
        'content-length':
          head(['content-type: application/json', `content-length: ${Math.max(0, len - 5)}`]) + body,
        'transfer-encoding':
          head(['content-type: application/json', 'transfer-encoding: chunked', `content-length: ${len}`]) +
          `${len.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
        'x-request-id':
          head(['content-type: application/json', `x-request-id: ${safe}#a1`, `content-length: ${len}`]) +
          body,
        authorization:
          head([
            'content-type: application/json',
            `authorization: Bearer ${safe}`,
            `content-length: ${len}`,
          ]) + body,
        host: `POST /v1/chat/completions HTTP/1.1\r\nhost: ${safe}\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${len}\r\n\r\n${body}`,
        expect:
          head(['content-type: application/json', 'expect: 100-continue', `content-length: ${len}`]) + body,
        connection:
          head(['content-type: application/json', `content-length: ${len}`, 'upgrade: websocket']) + body,
        huge:
          head(['content-type: application/json', `x-big: ${'h'.repeat(20_000)}`, `content-length: ${len}`]) +
          body,
        'dup-length':
          head(['content-type: application/json', `content-length: ${len}`, `content-length: ${len + 1}`]) +
          body,
      };
      return { kind: `header:${trick}`, method: 'POST', path: '', headers: [], body: '', raw: raw[trick] };
    }),
);

export interface Answer {
  status: number;
  text: string;
}

/** One request over a fresh socket (`connection: close`); status 0 = closed without an HTTP answer. */
export function send(url: string, c: Case, timeoutMs = 15_000): Promise<Answer | 'timeout'> {
  const { hostname, port } = new URL(url);
  let bytes: string;
  if (c.raw !== undefined) bytes = c.raw;
  else {
    const head = [`${c.method} ${c.path} HTTP/1.1`, `host: ${hostname}:${port}`, 'connection: close'];
    for (const [k, v] of c.headers) head.push(`${k}: ${v}`);
    head.push(`content-length: ${Buffer.byteLength(c.body)}`);
    bytes = head.join('\r\n') + '\r\n\r\n' + c.body;
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const sock = connect(Number(port), hostname);
    const timer = setTimeout(() => {
      sock.destroy();
      resolve('timeout');
    }, timeoutMs);
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, text });
    });
    sock.write(bytes);
  });
}

/** Headers, then the body a few bytes at a time with pauses, then the socket is dropped unfinished. */
export function slowLoris(url: string, i: number): Promise<void> {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify(validBase());
  return new Promise((resolve) => {
    const sock = connect(Number(port), hostname);
    sock.on('error', () => undefined);
    sock.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length + 100}\r\n\r\n`,
    );
    let at = 0;
    const tick = setInterval(() => {
      if (at >= 20 + (i % 10) || sock.destroyed) {
        clearInterval(tick);
        sock.destroy();
        resolve();
        return;
      }
      sock.write(body.slice(at, at + 1));
      at++;
    }, 20);
  });
}
