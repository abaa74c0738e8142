import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';

/** Where the etcd server binary is expected (Debian's `etcd-server` package). */
export const ETCD_BIN = process.env.MOTOR_ETCD_BIN ?? '/usr/bin/etcd';

/** `MOTOR_SKIP_ETCD=1` is the only way to skip the etcd tests; a missing binary is a failure. */
export const SKIP_ETCD = process.env.MOTOR_SKIP_ETCD === '1';

export interface EtcdServer {
  /** Client URL, e.g. `http://127.0.0.1:41234`. */
  endpoint: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Starts a private single-member etcd on free loopback ports with a temp data dir and resolves once
 * `/health` reports healthy (bounded). Short raft timings make it ready in well under a second and
 * let 1 s leases expire promptly.
 */
export async function startEtcd(opts: { readyTimeoutMs?: number } = {}): Promise<EtcdServer> {
  if (!existsSync(ETCD_BIN)) {
    throw new Error(
      `etcd server binary not found at ${ETCD_BIN}. Install Debian's etcd-server package ` +
        `(apt-get install -y etcd-server; .ci/run does this), point MOTOR_ETCD_BIN at an etcd binary, ` +
        `or set MOTOR_SKIP_ETCD=1 to skip the etcd tests.`,
    );
  }
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(opts.readyTimeoutMs ?? 10_000);
    } catch (err) {
      lastError = err as Error; // most likely a port taken between probing and binding: retry
    }
  }
  throw lastError!;
}

async function startOnce(readyTimeoutMs: number): Promise<EtcdServer> {
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const dataDir = mkdtempSync(join(tmpdir(), 'motor-etcd-'));
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawn(
    ETCD_BIN,
    [
      '--name=motor-test',
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${endpoint}`,
      `--advertise-client-urls=${endpoint}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=motor-test=${peer}`,
      '--heartbeat-interval=50',
      '--election-timeout=500',
      '--logger=zap',
      '--log-level=error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  running.add(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      running.delete(child);
      resolve();
    }),
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`etcd exited before becoming healthy (code ${child.exitCode}):\n${stderr}`);
    }
    try {
      const res = await request(`${endpoint}/health`, { headersTimeout: 500, bodyTimeout: 500 });
      const body = (await res.body.json()) as { health?: string };
      if (res.statusCode === 200 && body.health === 'true') return { endpoint, child, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`etcd at ${endpoint} not healthy within ${readyTimeoutMs} ms:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Per-file etcd for a test suite: starts it in `beforeAll` and fails *every test* (in `beforeEach`)
 * when it could not start — a failed `beforeAll` alone would make vitest report the tests as
 * skipped, which must not happen silently. Call inside a `describe`.
 */
export function useEtcd(hooks: {
  beforeAll: (fn: () => Promise<void>) => void;
  beforeEach: (fn: () => void) => void;
  afterAll: (fn: () => Promise<void>) => void;
}): { readonly endpoint: string } {
  let server: EtcdServer | undefined;
  let startError: Error | undefined;
  hooks.beforeAll(async () => {
    try {
      server = await startEtcd();
    } catch (err) {
      startError = err as Error;
    }
  });
  hooks.beforeEach(() => {
    if (startError) throw startError;
  });
  hooks.afterAll(async () => {
    await server?.stop();
  });
  return {
    get endpoint(): string {
      if (!server) throw startError ?? new Error('etcd is not running');
      return server.endpoint;
    },
  };
}
