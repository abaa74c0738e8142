import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../test/fixtures/engines/load.js';
import { EngineAuthError } from './engine-credentials.js';
import { engineReply, FakeEngineClient, unreachable, type EngineScript } from './testing/fake-clients.js';
import { SGLANG_PREFILL_OPTIONS } from './testing/in-process-proxy.js';
import type { EngineProxyOptions } from './options.js';
import { startEngineProxy } from './server.js';
import { learnSglangBootstrapPort } from './sglang-bootstrap-port.js';

/** A pino logger whose lines land in `lines` (parsed). */
function capturingLogger(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

const info = (port: number): Record<string, unknown> => ({
  ...fixtureBody('sglang/server/server-info.json'),
  disaggregation_bootstrap_port: port,
});

describe('learnSglangBootstrapPort: Rust server → HTTP port, else reported > --bootstrap-port > 8998', () => {
  const cases: Array<{
    name: string;
    script: EngineScript;
    configured: number | null;
    onHttpPort?: boolean;
    port: number;
    paths: string[];
    warns: RegExp | null;
  }> = [
    {
      name: "the engine's /server_info (fixture) wins",
      script: () => engineReply(200, fixtureBody('sglang/server/server-info.json')),
      configured: null,
      port: 8998,
      paths: ['/server_info'],
      warns: null,
    },
    {
      name: 'a flag that disagrees with the engine is a warning; the engine wins',
      script: () => engineReply(200, info(9100)),
      configured: 9200,
      port: 9100,
      paths: ['/server_info'],
      warns: /--bootstrap-port 9200 disagrees .* 9100; using the engine's/,
    },
    {
      name: 'older SGLang: /get_server_info after a 404',
      script: (req) => (req.path === '/server_info' ? engineReply(404, {}) : engineReply(200, info(9300))),
      configured: null,
      port: 9300,
      paths: ['/server_info', '/get_server_info'],
      warns: null,
    },
    {
      name: 'no info route at all: the flag, said so',
      script: () => engineReply(404, {}),
      configured: 9400,
      port: 9400,
      paths: ['/server_info', '/get_server_info'],
      warns: /bootstrap port 9400 from --bootstrap-port/,
    },
    {
      name: "no info route and no flag: SGLang's default 8998",
      script: () => engineReply(404, {}),
      configured: null,
      port: 8998,
      paths: ['/server_info', '/get_server_info'],
      warns: /bootstrap port 8998 from SGLang's default/,
    },
    {
      name: "SGLang's Rust server (frontend rust, fixture): the engine's HTTP port",
      script: () => engineReply(200, fixtureBody('sglang/rust-server/server-info.json')),
      configured: null,
      port: 30000,
      paths: ['/server_info'],
      warns: null,
    },
    {
      name: 'Rust server and a --bootstrap-port of its own: ignored, said so',
      script: () => engineReply(200, fixtureBody('sglang/rust-server/server-info.json')),
      configured: 8998,
      port: 30000,
      paths: ['/server_info'],
      warns:
        /--bootstrap-port 8998 ignored: SGLang's Rust server serves the bootstrap registry on its HTTP port 30000/,
    },
    {
      name: '--bootstrap-on-http-port and no info route: the HTTP port',
      script: () => engineReply(404, {}),
      configured: null,
      onHttpPort: true,
      port: 30000,
      paths: ['/server_info', '/get_server_info'],
      warns: /bootstrap port 30000 from the engine's HTTP port/,
    },
  ];
  it.each(cases)('$name', async ({ script, configured, onHttpPort, port, paths, warns }) => {
    const engine = new FakeEngineClient(script);
    const { log, lines } = capturingLogger();
    const opts = { configured, timeoutMs: 1000, httpPort: 30000, onHttpPort: onHttpPort === true };
    expect(await learnSglangBootstrapPort(engine, log, opts)).toBe(port);
    expect(engine.requests.map((r) => r.path)).toEqual(paths);
    const warning = lines.find((l) => l.level === 40);
    if (warns === null) expect(warning).toBeUndefined();
    else expect(String(warning?.msg)).toMatch(warns);
  });

  it('asks again while the engine is not up (unreachable, 503), then takes its answer', async () => {
    let calls = 0;
    const engine = new FakeEngineClient(() => {
      calls += 1;
      if (calls === 1) return unreachable();
      if (calls === 2) return engineReply(503, 'loading');
      return engineReply(200, info(9500));
    });
    const { log, lines } = capturingLogger();
    const port = await learnSglangBootstrapPort(engine, log, {
      configured: null,
      timeoutMs: 1000,
      retryMs: 1,
    });
    expect(port).toBe(9500);
    expect(calls).toBe(3);
    expect(lines.some((l) => /waiting for the engine/.test(String(l.msg)))).toBe(true);
  });

  it('a refused engine API key is fatal, not retried', async () => {
    const engine = new FakeEngineClient(() => {
      throw new EngineAuthError(401, 'GET', '/server_info', false);
    });
    const { log } = capturingLogger();
    await expect(
      learnSglangBootstrapPort(engine, log, { configured: null, timeoutMs: 1000 }),
    ).rejects.toThrow(/engine API key/);
    expect(engine.requests).toHaveLength(1);
  });
});

describe('an SGLang prefill proxy serves only once it knows the bootstrap port', () => {
  const opts: EngineProxyOptions = SGLANG_PREFILL_OPTIONS;

  it('waits for the engine, then advertises its port (not the HTTP port 30000)', async () => {
    let answer: (() => void) | null = null;
    const engine = new FakeEngineClient(
      (req) =>
        new Promise((resolve) => {
          answer = () => resolve(engineReply(200, info(9600)));
          void req;
        }),
    );
    let started = false;
    const starting = startEngineProxy(opts, capturingLogger().log, { engine }).then((s) => {
      started = true;
      return s;
    });
    await engine.received(1);
    expect(started).toBe(false);
    answer!();
    const server = await starting;
    try {
      expect(server.bootstrap).toEqual({ host: '10.0.0.5', port: 9600 });
      const res = await fetch(`${server.url}/v1/motor/info`);
      expect(((await res.json()) as { bootstrap: unknown }).bootstrap).toEqual({
        host: '10.0.0.5',
        port: 9600,
      });
    } finally {
      await server.close();
    }
  });

  it('a vLLM or decode proxy does not ask', async () => {
    for (const o of [
      { ...opts, engine: 'vllm' as const },
      { ...opts, role: 'decode' as const },
    ]) {
      const engine = new FakeEngineClient(unreachable);
      const server = await startEngineProxy(o, capturingLogger().log, { engine });
      expect(engine.requests).toEqual([]);
      expect(server.bootstrap).toBeNull();
      await server.close();
    }
  });
});
