import { Agent } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BOUND,
  getOver,
  LIMITS,
  rawSocket,
  SERVER_DEFAULT_BOUND,
  silentSockets,
} from '../../../test/helpers/raw-sockets.js';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startSimulator } from '../../simulator/server.js';
import { chatBody, post, sseEvents } from '../../simulator/testing/index.js';
import { startCoordinator } from '../coordinator.js';

/**
 * Issue 15 finding 5: the coordinator's public listener closes idle connections (`server.*Timeout*`)
 * and caps them (`server.maxConnections`), without cutting a generation that is silent for a while.
 */

const quiet = () => createLogger('gateway-limits-test', 'silent');

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function coordinator(server: Record<string, unknown>, instances: unknown[] = []): Promise<string> {
  const config = validateCoordinatorConfig({ server: { port: 0, ...server }, instances }, {});
  const running = await startCoordinator(config, quiet());
  closers.push(() => running.close());
  return running.url;
}

describe('coordinator listener limits (server.*)', () => {
  it('closes 20 connections that never send a byte within the header / idle timeout', async () => {
    const url = await coordinator(LIMITS);
    const closed = await silentSockets(url, 20);
    for (const { ms, data } of closed) {
      expect(data).toMatch(/^$|^HTTP\/1\.1 408 /); // whichever fires first
      expect(ms).toBeLessThan(SERVER_DEFAULT_BOUND);
    }
  });

  it('completes a streamed chat that is silent for longer than every timeout', async () => {
    // 400 ms before the first token, then one every 3 × BOUND: each gap outlasts every limit.
    const sim = await startSimulator(
      { role: 'union', prefillOverheadMs: 2 * BOUND, itlMs: 3 * BOUND },
      quiet(),
    );
    closers.push(() => sim.close());
    const url = await coordinator(LIMITS, [{ url: sim.url, role: 'union', mode: 'direct' }]);
    const res = await post(url, '/v1/chat/completions', chatBody('hi', { stream: true, max_tokens: 3 }));
    expect(res.status).toBe(200);
    expect(sseEvents(res.text).at(-1)).toBe('[DONE]');
  });

  it('at the cap closes a connection that sent nothing to let a new one in; a kept-alive /health still works', async () => {
    const url = await coordinator({ maxConnections: 2 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    closers.push(async () => agent.destroy());
    expect(await getOver(agent, url, '/health')).toMatchObject({ status: 200, reused: false });
    const second = rawSocket(url);
    closers.push(async () => second.destroy());
    const third = rawSocket(url, 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect((await second.closed).data).toBe(''); // before: it held its slot for headersTimeoutMs
    expect((await third.closed).data).toMatch(/^HTTP\/1\.1 200 /);
    expect(await getOver(agent, url, '/health')).toMatchObject({ status: 200, reused: true });
    const metrics = await getOver(agent, url, '/metrics');
    expect(metrics.body).toMatch(/motor_connections_shed_total\{reason="idle_evicted"\} 1/);
  });

  it('refuses a header timeout above the request timeout, naming both keys', () => {
    expect(() =>
      validateCoordinatorConfig({ server: { headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 } }, {}),
    ).toThrow(/server\.headersTimeoutMs.*must not exceed requestTimeoutMs \(1000\)/);
  });
});
