import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MotorChild } from '../src/cluster/motor-child.js';
import {
  MODEL,
  NIXL,
  rawPost,
  startCoordinatorProcess,
  startSim,
  stopAllSpawned,
  type CoordinatorHandle,
} from './e2e-cluster.js';
import { launchChromium, PNG_STATS_SCRIPT, type HeadlessChromium } from './helpers/chromium.js';

/**
 * The dashboard in a real browser (Debian chromium through playwright-core): a small P/D cluster
 * serves some requests, the page renders the fleet, live totals and P→D timelines, and the
 * screenshot is a real, non-blank image.
 */

interface PngStats {
  width: number;
  height: number;
  colours: number;
  variance: number;
}

describe('dashboard (headless Chromium)', () => {
  let sims: MotorChild[];
  let coord: CoordinatorHandle;
  let chromium: HeadlessChromium;

  beforeAll(async () => {
    // settled, not Promise.all: when Chromium fails to launch, the sims still starting must be
    // registered before afterAll stops them (they outlived the run otherwise)
    const results = await Promise.allSettled([
      startSim({ role: 'prefill' }),
      startSim({ role: 'decode' }),
      startSim({ role: 'decode' }),
    ]);
    const browser = await Promise.allSettled([launchChromium()]);
    for (const r of [...browser, ...results]) if (r.status === 'rejected') throw r.reason;
    chromium = (browser[0] as PromiseFulfilledResult<HeadlessChromium>).value;
    sims = results.map((r) => (r as PromiseFulfilledResult<MotorChild>).value);
    coord = await startCoordinatorProcess({
      instances: [
        {
          id: 'P0',
          url: sims[0]!.url,
          role: 'prefill',
          mode: 'direct',
          kvTransferConfig: NIXL,
          models: [MODEL],
        },
        {
          id: 'D0',
          url: sims[1]!.url,
          role: 'decode',
          mode: 'direct',
          kvTransferConfig: NIXL,
          models: [MODEL],
        },
        {
          id: 'D1',
          url: sims[2]!.url,
          role: 'decode',
          mode: 'direct',
          kvTransferConfig: NIXL,
          models: [MODEL],
        },
      ],
    });
  }, 180_000);

  afterAll(async () => {
    await chromium?.close();
    await stopAllSpawned();
  });

  it('renders the fleet, live request totals and P→D timelines; the screenshot is not blank', async () => {
    const requests = 6;
    await Promise.all(
      Array.from({ length: requests }, (_, i) =>
        rawPost(coord.url, '/v1/chat/completions', {
          model: MODEL,
          messages: [{ role: 'user', content: `dashboard request ${i}` }],
          max_tokens: 5,
          stream: i % 2 === 0,
        }).then((r) => expect(r.status).toBe(200)),
      ),
    );

    const page = await chromium.context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const res = await page.goto(`${coord.url}/dashboard?interval=250`);
    expect(res?.status()).toBe(200);
    // Wait for live data, not for time: the page marks itself once a state poll was rendered.
    await page.waitForFunction(
      `document.body.dataset.ready === 'true' && Number(document.body.dataset.requests) >= ${requests} && document.querySelectorAll('#recent .request-row .bar').length > 0`,
      undefined,
      { timeout: 60_000 },
    );

    const fleet = (await page.locator('#fleet .instance-row').allTextContents()).join('\n');
    expect(await page.locator('#fleet .instance-row').count()).toBe(3);
    for (const id of ['P0', 'D0', 'D1']) expect(fleet).toContain(id);
    expect(fleet).toContain('prefill');
    expect(fleet).toContain('decode');
    expect(fleet).toContain('routable');
    expect(Number(await page.locator('#total').textContent())).toBeGreaterThanOrEqual(requests);
    expect(await page.locator('#ttft').textContent()).toMatch(/ms|s/);
    // every recent request is a P→D timeline: a prefill bar and a decode bar, instances P0 → D*
    const rows = page.locator('#recent .request-row');
    expect(await rows.count()).toBeGreaterThanOrEqual(requests);
    const first = rows.first();
    expect(await first.locator('.bar.prefill').count()).toBe(1);
    expect(await first.locator('.bar.decode').count()).toBe(1);
    expect(await first.textContent()).toMatch(/P0 → D[01]/);
    expect(await first.textContent()).toContain('handoff');
    expect(errors).toEqual([]);

    const png = await page.screenshot({ fullPage: true });
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(png.length).toBeGreaterThan(20_000);
    const stats = (await page.evaluate(
      `(${PNG_STATS_SCRIPT})(${JSON.stringify(png.toString('base64'))})`,
    )) as PngStats;
    expect(stats.width).toBeGreaterThanOrEqual(1000);
    expect(stats.colours).toBeGreaterThan(20);
    expect(stats.variance).toBeGreaterThan(50);
  });

  it('serves the page with a restrictive CSP and the state as JSON', async () => {
    const page = await fetch(`${coord.url}/dashboard`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const state = (await (await fetch(`${coord.url}/dashboard/api/state`)).json()) as {
      instances: { id: string; role: string; inFlight: number; circuit: string | null }[];
      recent: { legs: { role: string; instance: string }[] }[];
    };
    expect(state.instances.map((i) => i.id).sort()).toEqual(['D0', 'D1', 'P0']);
    expect(state.instances.every((i) => i.circuit === 'closed')).toBe(true);
    expect(state.recent[0]!.legs.map((l) => l.role)).toEqual(['prefill', 'decode']);
  });
});
