import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { spawnMotor, type MotorChild } from '../src/cluster/motor-child.js';
import { recorded, until } from '../src/engine-proxy/testing/index.js';
import { SKIP_ETCD, startEtcd, type EtcdServer } from './helpers/etcd.js';
import { configFromEnv, validateCoordinatorConfig } from '../src/config/coordinator-config.js';
import { mergeDeep } from '../src/config/merge-deep.js';
import {
  codeBlocks,
  parseDockerfile,
  parseEnvFile,
  withGeneratedSecrets,
  parseUnitService,
  readText,
  shellCommands,
  splitWords,
} from './helpers/deploy-files.js';

/**
 * Issue 18 item 7: docs/deploy.md and deploy/ are what a test runs. The systemd units' ExecStart lines
 * and the Dockerfile's ENTRYPOINT + CMD run as written, with only these rewrites: `/usr/bin/node` and
 * `/opt/motor/` are this Node and this checkout, `/etc/motor/<file>` is deploy/<file> (or the test's
 * copy of motor.yaml, whose addresses are loopback, port 0 and the proxies' URLs), the env files'
 * listen address/port and engine URL point at loopback, port 0 and the simulators the doc starts in
 * place of the engines. The secrets are the env files' own. systemd itself, docker build and TLS do not
 * run here (the doc says so).
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DEPLOY = join(ROOT, 'deploy');
const DOC = readText(join(ROOT, 'docs/deploy.md'));
const deployFile = (name: string): string => readText(join(DEPLOY, name));
const coordinatorEnv = withGeneratedSecrets(parseEnvFile(deployFile('coordinator.env')));

/** `/etc/motor/<file>` → the test's copy (if written) or deploy/<file>; `/opt/motor/` → this checkout. */
function localPath(path: string, overrides: Record<string, string>): string {
  if (path.startsWith('/etc/motor/'))
    return overrides[path] ?? join(DEPLOY, path.slice('/etc/motor/'.length));
  if (path.startsWith('/opt/motor/')) return join(ROOT, path.slice('/opt/motor/'.length));
  return path;
}

/** The doc's shell commands starting with `prefix` (e.g. `motor sim`, `curl`). */
function docCommands(prefix: string): string[] {
  return codeBlocks(DOC)
    .filter((b) => b.lang === 'sh')
    .flatMap((b) => shellCommands(b.body))
    .filter((c) => c.startsWith(`${prefix} `));
}

describe('splitWords (the ExecStart and shell subset deploy/ and the doc use)', () => {
  const vars = { A: 'x', FLAGS: '--register http://h:1', EMPTY: '' };
  it.each<[string, string[]]>([
    ['a  b\\\n c', ['a', 'b', 'c']],
    [`--h "Bearer $A" -d '{"k":"$A"}'`, ['--h', 'Bearer x', '-d', '{"k":"$A"}']],
    ['--url ${A}:9 --peer http://h:*', ['--url', 'x:9', '--peer', 'http://h:*']],
    ['run $FLAGS', ['run', '--register', 'http://h:1']],
    ['run ${FLAGS}', ['run', '--register http://h:1']],
    ['run $EMPTY', ['run']],
    ["''", ['']],
  ])('%s', (line, words) => expect(splitWords(line, vars)).toEqual(words));

  it.each(['a | b', 'a; b', 'a $MISSING', "a 'b"])('refuses %s', (line) => {
    expect(() => splitWords(line, vars)).toThrow();
  });
});

describe('deploy/ files', () => {
  const yamls = readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml'));

  it.each(yamls)(
    '%s is a valid coordinator config (the coordinator’s own validator, coordinator.env set)',
    (f) => {
      const raw = parseYaml(deployFile(f)) as unknown;
      const config = validateCoordinatorConfig(mergeDeep(raw, configFromEnv(coordinatorEnv)), coordinatorEnv);
      expect(config.server.port).toBe(8000);
    },
  );

  it('the example env files as shipped are refused: every replace-me secret is named', () => {
    const shipped = parseEnvFile(deployFile('coordinator.env'));
    const raw = parseYaml(deployFile('motor.yaml')) as unknown;
    expect(() => validateCoordinatorConfig(mergeDeep(raw, configFromEnv(shipped)), shipped)).toThrow(
      /server\.apiKeys\[0\]: still the "replace-me…" example value[\s\S]*management\.adminToken: still[\s\S]*MOTOR_PEER_SECRET: peer secret #1: still/,
    );
  });

  it('covers the three fleets: proxies, direct mode, replicas on etcd', () => {
    expect(yamls.sort()).toEqual(['motor-direct.yaml', 'motor-etcd.yaml', 'motor.yaml']);
  });

  it('every file the doc shows is the deploy/ file, byte for byte', () => {
    const shown = new Set<string>();
    for (const block of codeBlocks(DOC)) {
      const first = block.body.split('\n')[0]!;
      const file = readdirSync(DEPLOY, { withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .find((f) => deployFile(f).split('\n')[0] === first);
      if (!file) continue;
      expect(block.body, `docs/deploy.md block showing deploy/${file}`).toBe(deployFile(file));
      shown.add(file);
    }
    for (const f of ['motor.yaml', 'motor-coordinator.service', 'motor-engine-proxy@.service', 'Dockerfile'])
      expect(shown).toContain(f);
  });

  it('systemd-analyze verify accepts both units (as an instance for the template)', () => {
    const units = join(mkdtempSync(join(tmpdir(), 'motor-units-')), 'x');
    mkdirSync(units);
    writeFileSync(join(units, 'motor-coordinator.service'), deployFile('motor-coordinator.service'));
    writeFileSync(
      join(units, 'motor-engine-proxy@prefill.service'),
      deployFile('motor-engine-proxy@.service'),
    );
    // it exits 0 on a setting it ignores, so its diagnostics (stderr) are what must be empty
    const run = spawnSync(
      'systemd-analyze',
      ['verify', join(units, 'motor-coordinator.service'), join(units, 'motor-engine-proxy@prefill.service')],
      { encoding: 'utf8' },
    );
    expect(run.error).toBeUndefined();
    expect(run.stderr + run.stdout).toBe('');
    expect(run.status).toBe(0);
    rmSync(join(units, '..'), { recursive: true, force: true });
  });

  it('the engine proxies and the coordinator share one peer secret', () => {
    for (const role of ['prefill', 'decode']) {
      expect(parseEnvFile(deployFile(`engine-proxy-${role}.env`)).MOTOR_PEER_SECRET).toBe(
        parseEnvFile(deployFile('coordinator.env')).MOTOR_PEER_SECRET,
      );
    }
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.end();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The doc's `motor sim` lines as arguments (without `motor`), on port 0: a prefill and a decode. */
function docSims(): string[][] {
  const lines = docCommands('motor sim').map((line) => splitWords(line).slice(1));
  expect(lines.map((args) => args[args.indexOf('--role') + 1])).toEqual(['prefill', 'decode']);
  for (const args of lines) args[args.indexOf('--port') + 1] = '0';
  return lines;
}

describe('docs/deploy.md with simulators standing in for engines', () => {
  const dir = mkdtempSync(join(tmpdir(), 'motor-deploy-'));
  const children: MotorChild[] = [];
  const proxies: Record<string, string> = {};
  /** The coordinators the unit and the container recipe started (the nginx test's two replicas). */
  const coordinators: string[] = [];
  const sims: Record<string, string> = {};
  /** Chat legs each simulator has served so far, by role. */
  const legs = async (engines: Record<string, string>): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const [role, url] of Object.entries(engines))
      out[role] = (await recorded(url)).filter((r) => r.path === '/v1/chat/completions').length;
    return out;
  };
  /** The doc's curl through `origin`, streamed, with one leg on each engine (a P/D answer). */
  const expectPdStream = async (origin: string, engines = sims, curlArgs: string[] = []): Promise<void> => {
    const before = await legs(engines);
    expectStreamed(await curl(origin, curlArgs));
    const after = await legs(engines);
    expect(after.prefill).toBe(before.prefill! + 1);
    expect(after.decode).toBe(before.decode! + 1);
  };
  const overrides: Record<string, string> = {};
  const start = async (
    args: string[],
    env: NodeJS.ProcessEnv,
    waitFor: string[] = [],
  ): Promise<MotorChild> => {
    const child = await spawnMotor(args, { env, timeoutMs: 60_000, waitFor });
    children.push(child);
    return child;
  };
  /** A systemd unit's ExecStart, run with its EnvironmentFile (plus `envOverrides`) as the whole env. */
  const runUnit = async (
    unitFile: string,
    instance: string,
    envOverrides: Record<string, string>,
    waitFor: string[] = [],
  ) => {
    const service = parseUnitService(deployFile(unitFile));
    const envFile = localPath(service.EnvironmentFile!.replace(/%i/g, instance), overrides);
    const env = { ...withGeneratedSecrets(parseEnvFile(readText(envFile))), ...envOverrides };
    const argv = splitWords(service.ExecStart!.replace(/%i/g, instance), env).map((w) =>
      localPath(w, overrides),
    );
    expect(argv.slice(0, 2)).toEqual(['/usr/bin/node', join(ROOT, 'bin/motor.js')]);
    return start(argv.slice(2), { PATH: process.env.PATH, ...env }, waitFor);
  };
  /** The doc's curl line against `origin` (its coordinator address rewritten), run by curl itself. */
  const curl = async (origin: string, extra: string[] = []): Promise<string> => {
    const [line] = docCommands('curl');
    const key = coordinatorEnv.MOTOR_API_KEYS!.split(',')[0]!;
    const argv = splitWords(line!, { MOTOR_API_KEY: key }).map((w) =>
      w.replace('http://10.0.0.5:8000', origin),
    );
    const child = spawn(argv[0]!, [...extra, ...argv.slice(1)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    return out;
  };
  const expectStreamed = (body: string): void => {
    const events = body.split('\n').filter((l) => l.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    const text = events
      .slice(0, -1)
      .map(
        (e) =>
          (JSON.parse(e.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta
            ?.content ?? '',
      )
      .join('');
    expect(events.length).toBeGreaterThan(3);
    expect(text.length).toBeGreaterThan(0);
  };

  beforeAll(async () => {
    const simLines = docSims();
    for (const args of simLines) {
      const role = args[args.indexOf('--role') + 1]!;
      sims[role] = (await start(args, process.env)).url;
      const proxy = await runUnit('motor-engine-proxy@.service', role, {
        ENGINE_URL: sims[role]!,
        LISTEN_HOST: '127.0.0.1',
        LISTEN_PORT: '0',
        PEER_ALLOW: 'http://127.0.0.1:*',
      });
      proxies[role] = proxy.url;
    }
    const config = parseYaml(deployFile('motor.yaml')) as {
      server: Record<string, unknown>;
      management: Record<string, unknown>;
      instances: { role: string; url: string }[];
    };
    config.server = { ...config.server, host: '127.0.0.1', port: 0 };
    config.management = { ...config.management, host: '127.0.0.1', port: 0 };
    for (const inst of config.instances) inst.url = proxies[inst.role]!;
    overrides['/etc/motor/motor.yaml'] = join(dir, 'motor.yaml');
    writeFileSync(overrides['/etc/motor/motor.yaml'], stringify(config));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(children.reverse().map((c) => c.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('motor-coordinator.service’s ExecStart serves the doc’s curl, streamed, through both proxies', async () => {
    // motor.yaml has a management port: wait for its `listening` line too, take the gateway's
    const coordinator = await runUnit('motor-coordinator.service', '', {}, ['management']);
    coordinators.push(coordinator.url);
    await expectPdStream(coordinator.url);
  }, 60_000);

  it('the container’s ENTRYPOINT + CMD (with --env-file coordinator.env) serves the same', async () => {
    const docker = parseDockerfile(deployFile('Dockerfile'));
    // `motor` on the image's PATH is this symlink to the package's bin
    expect(docker.runs).toContain('ln -s /opt/motor/bin/motor.js /usr/local/bin/motor');
    const [motor, ...args] = [...docker.entrypoint, ...docker.cmd].map((w) => localPath(w, overrides));
    expect(motor).toBe('motor');
    const coordinator = await start(args, { PATH: process.env.PATH, ...coordinatorEnv }, ['management']);
    coordinators.push(coordinator.url);
    await expectPdStream(coordinator.url);
  }, 60_000);

  it('nginx-motor.conf terminates TLS in front of both coordinators (nginx with a self-signed cert)', async () => {
    expect(coordinators).toHaveLength(2);
    const port = await freePort();
    const cert = join(dir, 'llm.example.com.pem');
    const key = join(dir, 'llm.example.com.key');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=llm.example.com'].concat([
        '-addext',
        'subjectAltName=DNS:llm.example.com',
        '-keyout',
        key,
        '-out',
        cert,
      ]),
      { stdio: 'ignore' },
    );
    const rewrites: [string, string][] = [
      ['server 10.0.0.5:8000', `server ${new URL(coordinators[0]!).host}`],
      ['server 10.0.0.6:8000', `server ${new URL(coordinators[1]!).host}`],
      ['listen 443 ', `listen 127.0.0.1:${port} `],
      ['/etc/ssl/certs/llm.example.com.pem', cert],
      ['/etc/ssl/private/llm.example.com.key', key],
    ];
    let conf = deployFile('nginx-motor.conf');
    for (const [from, to] of rewrites) {
      expect(conf).toContain(from);
      conf = conf.replace(from, to);
    }
    writeFileSync(join(dir, 'motor.conf'), conf);
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
      (t) => `${t}_temp_path ${dir}/${t};`,
    );
    // the snippet is an http-level include, as in /etc/nginx/conf.d/; one foreground process, files in dir
    const main = `daemon off; master_process off; pid ${dir}/nginx.pid; error_log ${dir}/nginx.log;
events {}
http { access_log off; ${temp.join(' ')} include ${dir}/motor.conf; }
`;
    writeFileSync(join(dir, 'nginx.conf'), main);
    const nginx = spawn(
      'nginx',
      ['-p', `${dir}/`, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'nginx.log')],
      {
        stdio: 'inherit',
      },
    );
    const exited = new Promise((resolve) => nginx.once('exit', resolve));
    try {
      await until(() => listening(port), `nginx listening on ${port}`);
      const origin = `https://llm.example.com:${port}`;
      await expectPdStream(origin, sims, [
        '--cacert',
        cert,
        '--resolve',
        `llm.example.com:${port}:127.0.0.1`,
      ]);
    } finally {
      nginx.kill('SIGTERM');
      await exited;
    }
  }, 60_000);

  it('motor-direct.yaml: the same answer with the engines’ --api-key from coordinator.env, no proxies', async () => {
    const key = coordinatorEnv.MOTOR_ENGINE_API_KEY!;
    const engines: Record<string, string> = {};
    for (const args of docSims()) {
      engines[args[args.indexOf('--role') + 1]!] = (
        await start([...args, '--api-key', key], process.env)
      ).url;
    }
    const config = parseYaml(deployFile('motor-direct.yaml')) as {
      server: Record<string, unknown>;
      instances: { role: string; url: string }[];
    };
    config.server = { ...config.server, host: '127.0.0.1', port: 0 };
    for (const inst of config.instances) inst.url = engines[inst.role]!;
    const file = join(dir, 'motor-direct.yaml');
    writeFileSync(file, stringify(config));
    const coordinator = await start(['coordinator', '--config', file], {
      PATH: process.env.PATH,
      ...coordinatorEnv,
    });
    await expectPdStream(coordinator.url, engines);
  }, 60_000);

  it.skipIf(SKIP_ETCD)(
    'motor-etcd.yaml: two replicas on etcd, proxies registering through one, the answer through each',
    async () => {
      let etcd: EtcdServer | undefined;
      try {
        etcd = await startEtcd();
        const config = parseYaml(deployFile('motor-etcd.yaml')) as Record<string, Record<string, unknown>>;
        config.server = { ...config.server, host: '127.0.0.1', port: 0 };
        config.management = { ...config.management, host: '127.0.0.1', port: 0 };
        config.registry = { ...config.registry, endpoints: [etcd.endpoint] };
        const file = join(dir, 'motor-etcd.yaml');
        writeFileSync(file, stringify(config));
        const env = { PATH: process.env.PATH, ...coordinatorEnv };
        const replicas = [
          await start(['coordinator', '--config', file], env, ['management']),
          await start(['coordinator', '--config', file], env, ['management']),
        ];
        for (const role of ['prefill', 'decode']) {
          await runUnit('motor-engine-proxy@.service', role, {
            ENGINE_URL: sims[role]!,
            LISTEN_HOST: '127.0.0.1',
            LISTEN_PORT: '0',
            PEER_ALLOW: 'http://127.0.0.1:*',
            // what the doc says to set for replicas (the proxy's bound URL is its advertised one here)
            REGISTER_FLAGS: `--register ${replicas[0]!.urls.management}`,
            MOTOR_ADMIN_TOKEN: coordinatorEnv.MOTOR_ADMIN_TOKEN!,
          });
        }
        for (const replica of replicas) {
          await until(async () => {
            const ready = (await (await fetch(`${replica.url}/ready`)).json()) as { models?: object };
            return Object.values(ready.models ?? {}).includes('prefill_handoff_decode');
          }, `P/D ready on ${replica.url}`);
          await expectPdStream(replica.url);
        }
      } finally {
        await etcd?.stop();
      }
    },
    90_000,
  );

  it('a proxy refuses a caller without the env file’s peer secret', async () => {
    const res = await fetch(`${proxies.prefill}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });
});
