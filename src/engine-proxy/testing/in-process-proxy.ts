import type { IncomingHttpHeaders } from 'node:http';
import { createLogger } from '../../common/logger.js';
import { FakeEngineClient, FakePeerClient, type EngineScript, type PeerScript } from './fake-clients.js';
import { ENGINE_PROXY_DEFAULTS, type EngineProxyOptions } from '../options.js';
import { http } from '../../simulator/testing/index.js';
import type { ProxyDeps } from '../proxy-context.js';
import { startEngineProxy } from '../server.js';

/** The peers an in-process proxy may call; envelopes in the unit tests name these. */
export const PREFILL_PEER = 'http://prefill-proxy.test:8001';
export const DECODE_PEER = 'http://decode-proxy.test:8002';
/** The fake engine's address (only its host and port matter: the default bootstrap address). */
export const ENGINE_URL = 'http://10.0.0.5:30000';

/** A proxy beside an SGLang prefill engine at ENGINE_URL (no peers, no bootstrap flags). */
export const SGLANG_PREFILL_OPTIONS: EngineProxyOptions = {
  ...ENGINE_PROXY_DEFAULTS,
  engineUrl: ENGINE_URL,
  role: 'prefill',
  engine: 'sglang',
  dispatchCapabilities: ['concurrent_engine_sync'],
  dispatchProfile: 'bootstrap',
  bootstrapHost: null,
  bootstrapPort: null,
  peerAllow: [],
};

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: unknown;
}

export interface InProcessProxy {
  url: string;
  engine: FakeEngineClient;
  peers: FakePeerClient;
  call(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    opts?: { headers?: Record<string, string>; signal?: AbortSignal },
  ): Promise<Answer>;
  /** One series of the proxy's /metrics, e.g. `motor_proxy_peer_stops_total{outcome="sent"}` (0 if absent). */
  metric(series: string): Promise<number>;
  close(): Promise<void>;
}

/**
 * An engine proxy on a loopback port whose engine and peers are in-process fakes: the proxy's real
 * HTTP handling, with every engine and peer answer scripted by the test. An SGLang prefill's script
 * must answer `/server_info` (`withSglangServerInfo`): the proxy waits for it before it serves.
 */
export async function startInProcessProxy(
  opts: Partial<EngineProxyOptions>,
  engineScript: EngineScript,
  peerScript?: PeerScript,
  deps: Pick<ProxyDeps, 'peerSecrets'> = {},
): Promise<InProcessProxy> {
  const engine = new FakeEngineClient(engineScript);
  const peers = new FakePeerClient(peerScript);
  const server = await startEngineProxy(
    {
      ...ENGINE_PROXY_DEFAULTS,
      engineUrl: ENGINE_URL,
      role: 'prefill',
      engine: 'vllm',
      dispatchCapabilities: ['prefill_handoff_decode', 'concurrent_engine_sync'],
      dispatchProfile: 'test',
      bootstrapHost: null,
      bootstrapPort: null,
      peerAllow: [PREFILL_PEER, DECODE_PEER],
      ...opts,
    },
    createLogger('engine-proxy-test', 'silent'),
    { engine, peers, ...deps },
  );
  // What the proxy asked at start-up (SGLang /server_info) is not what the tests look at.
  engine.requests.length = 0;
  const call: InProcessProxy['call'] = (method, path, body, callOpts = {}) =>
    http(server.url, method, path, body, callOpts.headers, callOpts.signal);
  return {
    url: server.url,
    engine,
    peers,
    call,
    metric: async (series) => {
      const { text } = await call('GET', '/metrics');
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    },
    close: () => server.close(),
  };
}
