import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../src/common/logger.js';
import { RedisRoutingBus } from '../src/state/routing-sync/redis-bus.js';
import { RoutingSync } from '../src/state/routing-sync/routing-sync.js';

const dir = mkdtempSync(join(tmpdir(), 'motor-redis-'));
let server: ChildProcess | null = null;
const syncs: RoutingSync[] = [];

/** An ephemeral loopback port (asked of the OS, then handed to redis-server). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function startRedis(port: number): Promise<void> {
  const p = spawn('/usr/bin/redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
  ]);
  server = p;
  await new Promise<void>((resolve, reject) => {
    p.stdout!.on('data', (d: Buffer) => {
      if (String(d).includes('Ready to accept')) resolve();
    });
    p.on('exit', (code) => reject(new Error(`redis-server exited ${code}`)));
  });
}

async function stopRedis(): Promise<void> {
  const p = server;
  server = null;
  if (!p || p.exitCode !== null) return;
  await new Promise((r) => (p.once('exit', r), p.kill('SIGKILL')));
}

afterAll(async () => {
  await Promise.all(syncs.map((s) => s.close()));
  await stopRedis();
  rmSync(dir, { recursive: true, force: true });
});

describe('routing sync over a real Redis (Debian redis-server)', () => {
  it('propagates loads and index records, survives an outage and converges after it', async () => {
    const port = await freePort();
    await startRedis(port);
    const log = createLogger('test', 'silent');
    const mk = (id: string) => {
      const s = new RoutingSync({
        bus: new RedisRoutingBus({ url: `redis://127.0.0.1:${port}`, channel: 'motor-test' }),
        log,
        replicaId: id,
        heartbeatMs: 200,
        peerTimeoutMs: 60_000,
      });
      syncs.push(s);
      return s;
    };
    const a = mk('a');
    const ia = a.newPrefixIndex(64);
    await a.start();
    expect(a.stats.warmStart).toBe('alone');
    ia.record('p1', [11, 12, 13]);
    const open = a.loads.begin('d1', { promptTokens: 50 });
    const b = mk('b');
    const ib = b.newPrefixIndex(64);
    await b.start(); // late joiner: state arrives before start() resolves
    expect(b.stats.warmStart).toBe('loaded');
    expect(ib.match([11, 12, 13])).toEqual(new Map([['p1', 3]]));
    expect(b.loads.get('d1').inflightRequests).toBe(1);

    ia.record('p2', [21, 22]);
    await vi.waitFor(() => expect(ib.match([21, 22])).toEqual(new Map([['p2', 2]])), { timeout: 10_000 });

    await stopRedis();
    await vi.waitFor(() => expect(b.stats.connected).toBe(false), { timeout: 10_000 });
    expect(b.loads.get('d1').inflightRequests).toBe(0); // routes on its own state
    open.end();
    const during = a.loads.begin('d2', { promptTokens: 5 }); // made while Redis is away
    await startRedis(port);
    await vi.waitFor(
      () => {
        expect(b.stats.connected).toBe(true);
        expect(b.loads.get('d2').inflightRequests).toBe(1);
        expect(b.loads.get('d1').inflightRequests).toBe(0);
      },
      { timeout: 20_000 },
    );
    during.end();
    await vi.waitFor(() => expect(b.loads.get('d2').inflightRequests).toBe(0), { timeout: 10_000 });
  }, 60_000);
});
