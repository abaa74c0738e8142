/**
 * Proxies bench:overhead starts next to Motor's coordinators: nginx `proxy_pass`, the minimal Node
 * proxies of node-min.ts, and a coordinator under `node --cpu-prof`. Each registers its own stop in
 * `cleanups` (run in reverse by the caller).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

export type Cleanups = Array<() => Promise<void>>;
export interface Listening {
  url: string;
  pid: number;
}

export function which(bin: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/usr/bin']))
    if (existsSync(join(dir, bin))) return join(dir, bin);
  return null;
}
export const TASKSET = which('taskset');

/**
 * The direct-mode instances of bench:overhead's single and P/D targets: one union sim, or a NIXL
 * prefill and decode (`sims` in that order).
 */
export function benchInstances(mode: 'single' | 'pd', sims: readonly { url: string }[], model: string) {
  if (mode === 'single') return [{ url: sims[0]!.url, role: 'union', mode: 'direct', models: [model] }];
  const nixl = { kv_connector: 'NixlConnector' };
  return [
    { id: 'P', url: sims[0]!.url, role: 'prefill', mode: 'direct', models: [model], kvTransferConfig: nixl },
    { id: 'D', url: sims[1]!.url, role: 'decode', mode: 'direct', models: [model], kvTransferConfig: nixl },
  ];
}

/** `motor sim` arguments of every benchmark sim: no model time, no request records or ledger kept. */
export const benchSimArgs = (role: string, extra: readonly string[] = []): string[] => [
  'sim',
  '--port',
  '0',
  '--role',
  role,
  '--time-scale',
  '0',
  '--record-max',
  '0',
  '--ledger-max',
  '0',
  ...extra,
];
/** Pins every thread of `pid` to `cpus` (no-op without taskset). */
export function pin(pid: number | undefined, cpus: string): void {
  if (TASKSET && pid) execFileSync(TASKSET, ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
}

function stopOnCleanup(child: ChildProcess, cleanups: Cleanups): void {
  cleanups.push(async () => {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  });
}

/** A Node process that prints a JSON line with `"listening"` and its `url` on stdout, as `motor` does. */
async function spawnListening(name: string, args: string[], cleanups: Cleanups): Promise<Listening> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  stopOnCleanup(child, cleanups);
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    if (!line.includes('"listening"')) continue;
    const url = (JSON.parse(line) as { url?: string }).url;
    if (url) {
      lines.close();
      child.stdout!.resume();
      return { url, pid: child.pid! };
    }
  }
  throw new Error(`${name}: exited before listening`);
}

/** A coordinator run as `node --cpu-prof` (not allowed in NODE_OPTIONS): its profile lands in `profileDir` at exit. */
export function profiledCoordinator(
  configFile: string,
  profileDir: string,
  cleanups: Cleanups,
  bin = fileURLToPath(new URL('../../bin/motor.js', import.meta.url)),
): Promise<Listening> {
  return spawnListening(
    'profiled coordinator',
    ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, bin, 'coordinator', '--config', configFile],
    cleanups,
  );
}

/** node-min.ts in its own process (through tsx's loader: a start-up cost only). */
export function nodeMin(upstreams: [string] | [string, string], cleanups: Cleanups): Promise<Listening> {
  const script = fileURLToPath(new URL('./node-min.ts', import.meta.url));
  const mode = upstreams.length === 2 ? 'pd' : 'single';
  return spawnListening(`node-min ${mode}`, ['--import', 'tsx', script, mode, ...upstreams], cleanups);
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** nginx `proxy_pass` to `upstream` (one worker, keep-alive upstream, no buffering); null without nginx. */
export async function startNginx(
  upstream: string,
  dir: string,
  cleanups: Cleanups,
): Promise<{ url: string; proc: ChildProcess } | null> {
  const NGINX = which('nginx');
  if (!NGINX) return null;
  const port = await freePort();
  const u = new URL(upstream);
  const conf = join(dir, 'nginx.conf');
  await writeFile(
    conf,
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log warn;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi;
  uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream sim { server ${u.host}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const proc = spawn(NGINX, ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: 'ignore' });
  stopOnCleanup(proc, cleanups);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const p = new Pool(url);
      const r = await p.request({ method: 'GET', path: '/health' });
      await r.body.text();
      await p.close();
      return { url, proc };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error('nginx did not start');
}
