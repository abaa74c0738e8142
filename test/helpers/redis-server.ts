import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** An ephemeral loopback port (asked of the OS, then handed to redis-server). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * Debian's redis-server on loopback (no persistence), stopped and started again on the same port for
 * outage tests. Installed by scripts/install-test-deps.
 */
export class RedisServer {
  private process: ChildProcess | null = null;
  private readonly dir = mkdtempSync(join(tmpdir(), 'motor-redis-'));

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisServer> {
    const server = await RedisServer.notStarted();
    await server.restart();
    return server;
  }

  /** A port for a server that is not running yet (a client started before its Redis). */
  static async notStarted(): Promise<RedisServer> {
    return new RedisServer(await freePort());
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts it (again) and resolves once it accepts connections. */
  async restart(): Promise<void> {
    const p = spawn('/usr/bin/redis-server', [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      this.dir,
    ]);
    this.process = p;
    await new Promise<void>((resolve, reject) => {
      p.stdout!.on('data', (d: Buffer) => {
        if (String(d).includes('Ready to accept')) resolve();
      });
      p.on('exit', (code) => reject(new Error(`redis-server exited ${code}`)));
    });
  }

  /** Kills it (an outage: clients see their connections drop). */
  async stop(): Promise<void> {
    const p = this.process;
    this.process = null;
    if (!p || p.exitCode !== null) return;
    await new Promise((r) => (p.once('exit', r), p.kill('SIGKILL')));
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
