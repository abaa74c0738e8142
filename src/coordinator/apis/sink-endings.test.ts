import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { MotorError } from '../../common/motor-error.js';
import { OpenAiPassThroughSink, type ClientSink } from '../dispatch/pipeline.js';
import { TranslatingSink, type ApiRendering } from './translating-sink.js';

/** What a sink did to its response: status, headers, and the bytes in order. */
class RecordingResponse {
  status = 0;
  headers: Record<string, unknown> = {};
  body = '';
  writableEnded = false;
  destroyed = false;
  writeHead(status: number, headers: Record<string, unknown> = {}): this {
    this.status = status;
    Object.assign(this.headers, headers);
    return this;
  }
  setHeader(name: string, value: unknown): void {
    this.headers[name] = value;
  }
  write(chunk: string | Buffer): boolean {
    this.body += chunk.toString();
    return true;
  }
  end(chunk?: string | Buffer): void {
    if (chunk !== undefined) this.body += chunk.toString();
    this.writableEnded = true;
  }
  destroy(): void {
    this.destroyed = true;
  }
  once(): this {
    return this;
  }
}

/** An API rendering that names each call, so the test sees which one the failure took. */
const rendering: ApiRendering = {
  start: () => 'event: start\n\n',
  chunk: () => '',
  end: () => 'event: end\n\n',
  streamError: (err) => `event: error ${err.code}\n\n`,
  json: (chat) => chat,
  renderError: (res, err) => {
    res.writeHead(err.status, { 'content-type': 'text/plain' });
    res.end(`api error ${err.code}`);
  },
};

type Make = (res: ServerResponse, stream: boolean) => ClientSink;
const SINKS: [name: string, make: Make][] = [
  ['pass-through', (res, stream) => new OpenAiPassThroughSink(res, 'req-1', stream)],
  ['translating', (res, stream) => new TranslatingSink(res, 'req-1', stream, rendering)],
];

const ERR = new MotorError('engine_error', 'the decode engine went away');

/** [case, stream, commit first, what the body ends with per sink (pass-through, translating)]. */
const CASES: [string, boolean, boolean, [string, string]][] = [
  [
    'after a committed stream: the API error ending',
    true,
    true,
    [
      `data: {"error":{"message":"the decode engine went away","type":"${ERR.type}","param":null,"code":"engine_error"}}\n\ndata: [DONE]\n\n`,
      'event: start\n\nevent: error engine_error\n\n',
    ],
  ],
  [
    'after a committed non-stream answer: closed, nothing added to what commit wrote',
    false,
    true,
    ['', 'event: start\n\n'],
  ],
];

describe('a failure after commit ends every API the same way (HttpClientSink)', () => {
  for (const [name, make] of SINKS) {
    it.each(CASES)(`${name}: %s`, (_case, stream, commit, bodies) => {
      const res = new RecordingResponse();
      const sink = make(res as unknown as ServerResponse, stream);
      if (commit) sink.commitStream();
      sink.fail(ERR);
      expect(res.writableEnded).toBe(true);
      expect(res.body).toBe(bodies[name === 'pass-through' ? 0 : 1]);
      expect(res.status).toBe(200);
      sink.fail(ERR); // an ended response is left alone
      expect(res.body).toBe(bodies[name === 'pass-through' ? 0 : 1]);
    });

    it(`${name}: before commit, the failure is the API's own error answer with the request id`, () => {
      const res = new RecordingResponse();
      const sink = make(res as unknown as ServerResponse, true);
      sink.fail(ERR);
      expect(sink.committed).toBe(true);
      expect(res.status).toBe(ERR.status);
      expect(res.headers['x-request-id']).toBe('req-1');
      if (name === 'translating') expect(res.body).toBe('api error engine_error');
      else expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'engine_error' } });
    });
  }
});
