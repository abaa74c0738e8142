import { Agent } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BOUND,
  getOver,
  LIMITS,
  rawSocket,
  SERVER_DEFAULT_BOUND,
  silentSockets,
} from '../../test/helpers/raw-sockets.js';
import { createLogger } from '../common/logger.js';
import { validateCoordinatorConfig } from '../config/coordinator-config.js';
import { startCoordinator } from '../coordinator/coordinator.js';
import { startSimulator } from '../simulator/server.js';
import { chatBody, post, sseEvents } from '../simulator/testing/index.js';
import { ENGINE_PROXY_DEFAULTS, type EngineProxyOptions } from './options.js';
import { startEngineProxy } from './server.js';

/** Issue 15 finding 5 on the engine proxy's listener (`--headers-timeout-ms`, …, `--max-connections`). */

const quiet = () => createLogger('proxy-limits-test', 'silent');

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function proxy(engineUrl: string, limits: Partial<EngineProxyOptions>): Promise<string> {
  const running = await startEngineProxy(
    {
      ...ENGINE_PROXY_DEFAULTS,
      engineUrl,
      role: 'union',
      engine: 'vllm',
      dispatchCapabilities: [],
      dispatchProfile: 'unknown',
      bootstrapHost: null,
      bootstrapPort: null,
      peerAllow: [],
      ...limits,
    },
    quiet(),
  );
  closers.push(() => running.close());
  return running.url;
}

describe('engine proxy listener limits', () => {
  it('closes 20 connections that never send a byte within the header / idle timeout', async () => {
    const url = await proxy('http://127.0.0.1:9', LIMITS);
    for (const { ms } of await silentSockets(url, 20)) expect(ms).toBeLessThan(SERVER_DEFAULT_BOUND);
  });

  it('refuses the (cap+1)th connection with 503 while a kept-alive connection still works', async () => {
    const url = await proxy('http://127.0.0.1:9', { maxConnections: 1 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    closers.push(async () => agent.destroy());
    expect(await getOver(agent, url, '/v1/motor/info')).toMatchObject({ status: 200, reused: false });
    const refused = await rawSocket(url).closed;
    expect(refused.data).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(await getOver(agent, url, '/v1/motor/info')).toMatchObject({ status: 200, reused: true });
  });

  it('relays a stream that is silent for longer than every timeout', async () => {
    const sim = await startSimulator(
      { role: 'union', prefillOverheadMs: 2 * BOUND, itlMs: 3 * BOUND },
      quiet(),
    );
    closers.push(() => sim.close());
    const proxyUrl = await proxy(sim.url, LIMITS);
    const config = validateCoordinatorConfig(
      { server: { port: 0 }, instances: [{ url: proxyUrl, role: 'union' }] },
      {},
    );
    const coordinator = await startCoordinator(config, quiet());
    closers.push(() => coordinator.close());
    const res = await post(
      coordinator.url,
      '/v1/chat/completions',
      chatBody('hi', { stream: true, max_tokens: 3 }),
    );
    expect(res.status).toBe(200);
    expect(sseEvents(res.text).at(-1)).toBe('[DONE]');
  });
});
