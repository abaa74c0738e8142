import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's chromium (`apt-get install -y chromium`, done by .ci/run); no browser is ever downloaded. */
export const CHROMIUM_PATH = process.env.MOTOR_CHROMIUM ?? '/usr/bin/chromium';

export interface HeadlessChromium {
  /** A persistent context on the fresh profile directory (`newPage()` from here). */
  context: BrowserContext;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile (`--user-data-dir`), removed again on close. */
export async function launchChromium(): Promise<HeadlessChromium> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: run 'apt-get install -y chromium' (see .ci/run)`);
  }
  const profile = await mkdtemp(join(tmpdir(), 'motor-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    timeout: 60_000,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
    viewport: { width: 1400, height: 900 },
    // Playwright evaluates string predicates with eval, which the dashboard's CSP forbids.
    bypassCSP: true,
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Distinct colours and luminance variance of a PNG, measured in the page itself (canvas), so the
 * blank-screenshot check needs no image library.
 */
export const PNG_STATS_SCRIPT = `async (b64) => {
  const img = new Image();
  img.src = 'data:image/png;base64,' + b64;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const colours = new Set();
  let sum = 0, sum2 = 0, n = 0;
  for (let i = 0; i < d.length; i += 16) {
    const y = 0.2126 * d[i] + 0.7152 * d[i + 1] + 0.0722 * d[i + 2];
    sum += y; sum2 += y * y; n++;
    if (colours.size < 5000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  }
  const mean = sum / n;
  return { width: c.width, height: c.height, colours: colours.size, variance: sum2 / n - mean * mean };
}`;
