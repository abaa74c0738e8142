import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { errorTypeForStatus } from '../common/http.js';
import type { BeginRefusalCode } from './attempt-tracker.js';
import { UPLOAD_REFUSAL_MIN_CHARS } from '../common/upload-refusal.js';
import { PROXY_ERROR_CODES, ProxyError, sendError, type ProxyErrorCode } from './proxy-error.js';

/** Captures what `sendError` writes. */
function capture(): {
  res: ServerResponse;
  status: () => number;
  headers: () => unknown;
  body: () => string;
} {
  let status = 0;
  let headers: unknown;
  let body = '';
  const res = {
    writeHead(s: number, h: unknown) {
      status = s;
      headers = h;
    },
    end(b: string) {
      body = b;
    },
  } as unknown as ServerResponse;
  return { res, status: () => status, headers: () => headers, body: () => body };
}

describe('PROXY_ERROR_CODES', () => {
  it.each(Object.entries(PROXY_ERROR_CODES))(
    '%s: the type is the one its status always had',
    (_code, entry) => {
      expect(entry.type).toBe(errorTypeForStatus(entry.status));
    },
  );

  // The attempt tracker's refusals are codes of the table with the same status.
  const tracker: Array<[BeginRefusalCode, number]> = [
    ['attempt_in_flight', 409],
    ['attempt_finished', 409],
    ['dispatch_stopped', 409],
    ['too_many_attempts', 503],
  ];
  it.each(tracker)('tracker refusal %s is %i and on the wire', (code, status) => {
    expect(PROXY_ERROR_CODES[code]).toMatchObject({ status, wire: true });
  });
});

describe('sendError', () => {
  const cases: Array<{ err: ProxyError; status: number; body: string }> = [
    {
      err: new ProxyError('invalid_request', 'bad field', { param: 'x' }),
      status: 400,
      body: '{"error":{"message":"bad field","type":"invalid_request_error","param":"x","code":null}}',
    },
    {
      err: new ProxyError('role_mismatch', 'no', { param: '_motor_dispatch.role' }),
      status: 400,
      body: '{"error":{"message":"no","type":"invalid_request_error","param":"_motor_dispatch.role","code":"role_mismatch"}}',
    },
    {
      err: new ProxyError('dispatch_stopped', 'stopped'),
      status: 409,
      body: '{"error":{"message":"stopped","type":"invalid_request_error","param":null,"code":"dispatch_stopped"}}',
    },
    {
      err: new ProxyError('not_found', 'gone', { param: 'request_id' }),
      status: 404,
      body: '{"error":{"message":"gone","type":"not_found_error","param":"request_id","code":null}}',
    },
    {
      err: ProxyError.engineUnreachable(new Error('connect ECONNREFUSED')),
      status: 502,
      body: '{"error":{"message":"engine unreachable: connect ECONNREFUSED","type":"server_error","param":null,"code":null}}',
    },
    {
      err: ProxyError.fromAdapter({ status: 400, message: 'adapter says no', param: 'p' }),
      status: 400,
      body: '{"error":{"message":"adapter says no","type":"invalid_request_error","param":"p","code":null}}',
    },
    {
      err: ProxyError.fromAdapter({ status: 502, message: 'engine said nonsense', param: null }),
      status: 502,
      body: '{"error":{"message":"engine said nonsense","type":"server_error","param":null,"code":null}}',
    },
  ];

  it.each(cases)('$err.code → $status', ({ err, status, body }) => {
    const out = capture();
    sendError(out.res, err);
    expect(out.status()).toBe(status);
    expect(out.body()).toBe(body);
    expect(out.headers()).toEqual({
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
  });

  it('every code renders', () => {
    for (const code of Object.keys(PROXY_ERROR_CODES) as ProxyErrorCode[]) {
      const out = capture();
      sendError(out.res, new ProxyError(code, 'm'));
      expect(JSON.parse(out.body()).error.code).toBe(PROXY_ERROR_CODES[code].wire ? code : null);
    }
  });
});

describe('ProxyError.engineUnreachable: an upload the engine cut (common/upload-refusal.ts)', () => {
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  it.each([
    ['a reset of a large body', reset, UPLOAD_REFUSAL_MIN_CHARS, 'body_too_large', 413],
    ['a reset of a small body', reset, 100, 'engine_unreachable', 502],
    ['a refused connection, large body', refused, UPLOAD_REFUSAL_MIN_CHARS, 'engine_unreachable', 502],
    ['no body length given', reset, undefined, 'engine_unreachable', 502],
  ] as const)('%s → %s', (_name, cause, chars, code, status) => {
    const err = ProxyError.engineUnreachable(cause, chars);
    expect(err.code).toBe(code);
    expect(err.status).toBe(status);
    if (code === 'body_too_large') expect(err.message).toMatch(/over the engine's own size limit/);
  });
});
