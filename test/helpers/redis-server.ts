import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A real Debian `redis-server` on an ephemeral loopback port, no persistence, for one test file. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Kills it (SIGKILL: an outage, not a shutdown) and waits for the exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after `kill`). */
  restart(): Promise<void>;
  /** Kills it and removes its directory. */
  stop(): Promise<void>;
}

/** An ephemeral loopback port (asked of the OS, then handed to redis-server). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export async function startRedisServer(): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'motor-redis-'));
  const port = await freePort();
  let proc: ChildProcess | null = null;
  const launch = async (): Promise<void> => {
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
    proc = p;
    await new Promise<void>((resolve, reject) => {
      p.stdout!.on('data', (d: Buffer) => {
        if (String(d).includes('Ready to accept')) resolve();
      });
      p.on('exit', (code) => reject(new Error(`redis-server exited ${code}`)));
    });
  };
  const kill = async (): Promise<void> => {
    const p = proc;
    proc = null;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise((r) => (p.once('exit', r), p.kill('SIGKILL')));
  };
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: launch,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
