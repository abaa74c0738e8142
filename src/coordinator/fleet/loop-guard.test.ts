import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../common/logger.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { startCoordinator, type RunningCoordinator } from '../coordinator.js';
import { HOP_HEADER, LOCAL_HOP_ID, MAX_HOPS } from './hop-header.js';

/**
 * Issue 15 finding 10: an admin-registered URL may not point at link-local / metadata addresses or
 * at the coordinator itself unless allowed; when it is allowed (or a host name hides it), the hop
 * header turns the loop into one fast 508 instead of ~256 recursive hops for 60 s.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function coordinator(
  allowInstanceUrls: Record<string, boolean> = {},
  apiKeys: string[] = [],
): Promise<RunningCoordinator> {
  const config = validateCoordinatorConfig({
    server: { port: 0, apiKeys, instanceErrorsToClients: true }, // the tests read the loop's own words
    instances: [],
    health: { intervalMs: 0 },
    observability: { accessLog: false, metrics: false, dashboard: false },
    management: { port: 0, allowInstanceUrls },
  });
  const running = await startCoordinator(config, createLogger('loop-guard-test', 'silent'));
  closers.push(() => running.close());
  return running;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { message: string; param: string | null; code: string } };
  return { status: res.status, error: json.error };
}

const union = (url: string) => ({ id: 'u0', role: 'union', mode: 'direct', url, models: ['m'] });
const CHAT = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

describe('admin-registered instance URLs', () => {
  it('refuses link-local, metadata and the coordinator’s own ports, naming the field and the setting', async () => {
    const c = await coordinator();
    const mgmt = c.managementUrl!;
    const own = (u: string) => u.replace('127.0.0.1', 'localhost');
    for (const [url, why] of [
      ['http://169.254.169.254/latest', /link-local or cloud-metadata.*allowInstanceUrls\.linkLocal/],
      ['http://[fe80::1]:8000', /link-local/],
      ['http://metadata.google.internal', /cloud-metadata/],
      [c.url, /this coordinator's own listener.*allowInstanceUrls\.self/],
      [own(mgmt), /this coordinator's own listener/],
    ] as const) {
      const r = await post(`${mgmt}/v1/instances`, union(url));
      expect(r.status, url).toBe(400);
      expect(r.error).toMatchObject({ param: 'url', message: expect.stringMatching(why) });
    }
    const refresh = await post(`${mgmt}/instances/refresh`, { event: 'add', instances: [union(c.url)] });
    expect(refresh).toMatchObject({ status: 400, error: { param: 'instances[0].url' } });
    expect((await post(`${mgmt}/v1/instances`, union('http://127.0.0.1:9'))).status).toBe(201);
  });

  it('allowed to point at itself, a request fails once, fast, with 508 — no recursion', async () => {
    const c = await coordinator({ self: true });
    expect((await post(`${c.managementUrl}/v1/instances`, union(c.url))).status).toBe(201);
    const started = Date.now();
    const r = await post(`${c.url}/v1/chat/completions`, CHAT);
    expect(r.status).toBe(508);
    expect(r.error).toMatchObject({ code: 'loop_detected' });
    expect(r.error!.message).toMatch(
      /single instance u0 sent the request back to a Motor coordinator.*came back to the Motor coordinator that sent it \(after 1 hop\)/,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it.each([
    ['its own id', LOCAL_HOP_ID, 508],
    ['its own id among others', `a1b2,${LOCAL_HOP_ID}`, 508],
    [`${MAX_HOPS} other coordinators`, Array.from({ length: MAX_HOPS }, (_, i) => `c${i}`).join(','), 508],
    ['one other coordinator', 'c0', 503], // accepted (no instance to serve it)
  ])('a client request carrying %s (x-motor-hops: %s) → %s', async (_name, hops, status) => {
    const c = await coordinator();
    expect((await post(`${c.url}/v1/chat/completions`, CHAT, { [HOP_HEADER]: hops })).status).toBe(status);
  });

  // The 508 names this coordinator's place in a loop: only an authenticated caller may learn it.
  it.each([
    ['no key', {}, 401],
    ['a wrong key', { authorization: 'Bearer wrong' }, 401],
    ['the key', { authorization: 'Bearer k1' }, 508],
  ])('with API keys, its own hop id and %s → %s (the key is checked first)', async (_n, auth, status) => {
    const c = await coordinator({}, ['k1']);
    const headers = { [HOP_HEADER]: LOCAL_HOP_ID, ...auth };
    expect((await post(`${c.url}/v1/chat/completions`, CHAT, headers)).status).toBe(status);
  });
});
