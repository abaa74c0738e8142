import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { ManualClock } from '../../common/clock.js';
import { EngineMetricsStore } from '../../scheduling/index.js';
import { ENGINE_PROXY_DEFAULTS } from '../../engine-proxy/options.js';
import { startEngineProxy, type EngineProxyServer } from '../../engine-proxy/server.js';
import { startSimulator, type RunningSimulator } from '../../simulator/server.js';
import { EngineMetricsScraper } from './engine-metrics-scraper.js';
import { StaticInstanceSource } from './instance-source.js';
import { Upstreams } from './upstream.js';

describe('EngineMetricsScraper against a real simulator', () => {
  let sim: RunningSimulator;
  let proxy: EngineProxyServer;
  const upstreams = new Upstreams({ connectionsPerInstance: 2, keepAliveMs: 1000, connectMs: 5000 });
  const log = createLogger('test', 'silent');

  beforeAll(async () => {
    sim = await startSimulator({ port: 0, timeScale: 0 }, log);
    proxy = await startEngineProxy(
      {
        ...ENGINE_PROXY_DEFAULTS,
        engineUrl: sim.url,
        role: 'union',
        engine: 'vllm',
        dispatchCapabilities: [],
        dispatchProfile: 'unknown',
        bootstrapHost: null,
        bootstrapPort: null,
        peerAllow: [],
      },
      log,
    );
  });
  afterAll(async () => {
    await upstreams.close();
    await proxy.close();
    await sim.close();
  });

  it('stores fresh vLLM metrics per instance; an unreachable instance stays without (then stale)', async () => {
    const config = validateCoordinatorConfig({
      instances: [
        { id: 'up', url: sim.url, role: 'union', mode: 'direct' },
        { id: 'proxied', url: proxy.url, role: 'union', mode: 'proxy' },
        { id: 'down', url: 'http://127.0.0.1:1', role: 'union', mode: 'direct' },
      ],
    });
    const clock = new ManualClock(1_000);
    const store = new EngineMetricsStore({ staleAfterMs: 500, clock });
    const scraper = new EngineMetricsScraper({
      source: new StaticInstanceSource(config.instances),
      upstreams,
      store,
      intervalMs: 1000,
      timeoutMs: 5000,
      log,
      now: () => clock.now(),
    });
    await scraper.tick();
    expect(store.fresh('up')).toMatchObject({
      num_requests_running: 0,
      num_requests_waiting: 0,
      kv_cache_usage_perc: 0,
      scraped_at_ms: 1_000,
    });
    // Through an engine proxy: the engine's vllm:* series, not the proxy's own metrics.
    expect(store.fresh('proxied')).toMatchObject({ num_requests_running: 0, scraped_at_ms: 1_000 });
    expect(store.fresh('down')).toBeUndefined();
    expect(scraper.counts).toMatchObject({ ok: 2, failed: 1 });
    clock.advance(501);
    expect(store.fresh('up')).toBeUndefined(); // stale
    expect(store.fallbacks.stale).toBe(1);
  });
});
