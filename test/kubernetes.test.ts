import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/cli/engine-proxy.js';
import { createProgram } from '../src/cli/program.js';
import { loadCoordinatorConfig, type CoordinatorConfig } from '../src/config/coordinator-config.js';
import type { EngineProxyOptions } from '../src/engine-proxy/options.js';
import { withGeneratedSecrets } from './helpers/deploy-files.js';
import {
  containerEnv,
  expandRefs,
  flagValues,
  kubernetesValidator,
  portNumber,
  readManifests,
  selects,
  type Container,
  type Manifest,
  type PodFacts,
  type ServiceSpec,
  type Workload,
} from './helpers/kubernetes-manifests.js';

/**
 * deploy/kubernetes/ has never run on a cluster here (docs/deploy.md says so). What is checked instead:
 * every manifest against the Kubernetes API schemas (release-1.36, vendored in
 * test/fixtures/kubernetes/), and every Motor container's command line as the kubelet would hand it
 * over (env from the Secret, ConfigMap and the pod's own fields, `$(VAR)` expanded, mounted ConfigMap
 * files) through Motor's own CLI parser, engine-proxy option resolver and coordinator config loader;
 * then the wiring between them: ports, probes, Services, the peer secret, drain times, and that each
 * proxy agrees with the engine beside it.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIR = join(ROOT, 'deploy/kubernetes');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const manifests = readManifests(DIR);
const validate = kubernetesValidator(join(ROOT, 'test/fixtures/kubernetes/api-schemas.json'));
const scratch = mkdtempSync(join(tmpdir(), 'motor-k8s-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const byKind = <T extends Manifest>(kind: string): T[] => manifests.filter((m) => m.kind === kind) as T[];
const workloads = [...byKind<Workload>('Deployment'), ...byKind<Workload>('StatefulSet')].map((w) => ({
  ...w,
  spec: w.body.spec as Workload['spec'],
}));
const services = byKind('Service').map((s) => ({ name: s.name, spec: s.body.spec as ServiceSpec }));

/** Secret and ConfigMap keys; the Secret's `replace-me…` values generated, as an operator must. */
function lookup(kind: 'Secret' | 'ConfigMap', name: string, key: string): string | undefined {
  const m = manifests.find((x) => x.kind === kind && x.name === name);
  if (m === undefined) return undefined;
  const data = (kind === 'Secret' ? m.body.stringData : m.body.data) as Record<string, string> | undefined;
  return data === undefined ? undefined : withGeneratedSecrets(data)[key];
}

/** A stand-in pod of the workload: a StatefulSet's first ordinal, a Deployment's generated name. */
function podOf(w: (typeof workloads)[number]): PodFacts {
  return { name: w.kind === 'StatefulSet' ? `${w.name}-0` : `${w.name}-5d8f7c9b6-x2k4q`, ip: '10.244.3.17' };
}

/** The container's ConfigMap mounts as files in a scratch folder; returns mountPath → folder. */
function mountFiles(w: (typeof workloads)[number], c: Container): Map<string, string> {
  const out = new Map<string, string>();
  for (const mount of c.volumeMounts ?? []) {
    const volume = w.spec.template.spec.volumes?.find((v) => v.name === mount.name);
    if (volume?.configMap === undefined) continue;
    const cm = manifests.find((m) => m.kind === 'ConfigMap' && m.name === volume.configMap!.name);
    expect(cm, `${w.name}/${c.name}: ConfigMap ${volume.configMap.name}`).toBeDefined();
    const data = cm!.body.data as Record<string, string>;
    const items = volume.configMap.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    const folder = join(scratch, w.name, c.name, mount.name);
    mkdirSync(folder, { recursive: true });
    for (const { key, path } of items) {
      expect(data[key], `${w.name}: ConfigMap ${cm!.name} key ${key}`).toBeDefined();
      writeFileSync(join(folder, path), data[key]!);
    }
    out.set(mount.mountPath, folder);
  }
  return out;
}

interface Parsed {
  command: string;
  opts: Record<string, unknown>;
}

/** The words through Motor's own CLI parser (the `motor` program), the action replaced by a capture. */
async function parseMotorArgs(words: string[], env: Record<string, string>): Promise<Parsed> {
  const program = createProgram(VERSION).exitOverride();
  let parsed: Parsed | undefined;
  for (const sub of program.commands as Command[])
    sub.exitOverride().action((opts: Record<string, unknown>) => {
      parsed = { command: sub.name(), opts };
    });
  await withEnv(env, () => program.parseAsync(words, { from: 'user' }));
  if (parsed === undefined) throw new Error(`no command ran for ${words.join(' ')}`);
  return parsed;
}

async function withEnv<T>(env: Record<string, string>, run: () => Promise<T>): Promise<T> {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    return await run();
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

interface MotorContainer {
  workload: (typeof workloads)[number];
  pod: PodFacts;
  container: Container;
  engine: Container | undefined;
  env: Record<string, string>;
  words: string[];
  parsed: Parsed;
}

/** Every container running the Motor image, as the kubelet would start it, parsed by Motor's CLI. */
async function motorContainers(): Promise<MotorContainer[]> {
  const out: MotorContainer[] = [];
  for (const workload of workloads) {
    const pod = podOf(workload);
    for (const container of workload.spec.template.spec.containers) {
      if (!container.image.startsWith('motor:')) continue;
      const env = containerEnv(container, pod, lookup);
      const mounts = mountFiles(workload, container);
      const words = (container.args ?? []).map((a) => {
        const expanded = expandRefs(a, env);
        for (const [at, folder] of mounts)
          if (expanded.startsWith(`${at}/`)) return folder + expanded.slice(at.length);
        return expanded;
      });
      const engine = workload.spec.template.spec.containers.find((c) => c !== container);
      out.push({ workload, pod, container, engine, env, words, parsed: await parseMotorArgs(words, env) });
    }
  }
  return out;
}

const containers = await motorContainers();
const proxies = containers.filter((c) => c.parsed.command === 'engine-proxy');
const coordinators = containers.filter((c) => c.parsed.command === 'coordinator');

describe('deploy/kubernetes/ against the Kubernetes API schemas (release-1.36)', () => {
  it.each(manifests.map((m) => [`${m.file}: ${m.kind} ${m.name}`, m] as const))('%s', (_name, m) => {
    expect(validate(m)).toEqual([]);
  });

  /** The parts of the coordinator Deployment the refusals below edit. */
  interface Editable {
    apiVersion: string;
    kind: string;
    spec: {
      selector?: unknown;
      template: {
        spec: {
          containers: (Container & { port?: number; resources: { limits: { memory: string } } })[];
        };
      };
    };
  }
  const deployment = manifests.find((m) => m.kind === 'Deployment')!;
  const edited = (edit: (d: Editable) => void): Manifest => {
    const body = structuredClone(deployment.body) as unknown as Editable;
    edit(body);
    return {
      ...deployment,
      apiVersion: body.apiVersion,
      kind: body.kind,
      body: body as unknown as Manifest['body'],
    };
  };
  it.each<[string, (d: Editable) => void, RegExp]>([
    [
      'an unknown field',
      (d) => (d.spec.template.spec.containers[0]!.port = 1),
      /additional properties 'port'/,
    ],
    [
      'a wrong apiVersion for the kind',
      (d) => (d.apiVersion = 'apps/v1beta1'),
      /no schema for apps\/v1beta1/,
    ],
    ['a kind under the wrong group', (d) => (d.apiVersion = 'v1'), /no schema for v1 Deployment/],
    [
      'a port out of range',
      (d) => (d.spec.template.spec.containers[0]!.ports![0]!.containerPort = 2 ** 31),
      /<=/,
    ],
    [
      'a malformed quantity',
      (d) => (d.spec.template.spec.containers[0]!.resources.limits.memory = '1 GB'),
      /pattern/,
    ],
    ['a missing required field', (d) => delete d.spec.selector, /required property 'selector'/],
  ])('refuses %s', (_name, edit, want) => {
    expect(validate(edited(edit)).join('\n')).toMatch(want);
  });

  it('the kinds used are the kinds vendored, no more', () => {
    expect([...new Set(manifests.map((m) => `${m.apiVersion} ${m.kind}`))].sort()).toEqual([
      'apps/v1 Deployment',
      'apps/v1 StatefulSet',
      'v1 ConfigMap',
      'v1 Secret',
      'v1 Service',
    ]);
  });
});

describe('deploy/kubernetes/ Motor containers, through Motor’s own CLI and config loader', () => {
  it('one coordinator; a prefill and a decode proxy beside vLLM and beside SGLang', () => {
    expect(coordinators).toHaveLength(1);
    const pairs = proxies.map((p) => `${engineKind(p.engine)} ${String(p.parsed.opts.role)}`).sort();
    expect(pairs).toEqual(['sglang decode', 'sglang prefill', 'vllm decode', 'vllm prefill']);
  });

  it.each(containers.map((c) => [`${c.workload.name}/${c.container.name}`, c] as const))(
    '%s runs the image of this package version',
    (_name, c) => {
      expect(c.container.image).toBe(`motor:${VERSION}`);
    },
  );

  const coordinator = coordinators[0]!;
  const loadConfig = (): Promise<CoordinatorConfig> =>
    loadCoordinatorConfig(coordinator.parsed.opts, { ...process.env, ...coordinator.env });

  it('the coordinator config loads with the Secret’s env; ports, probes and scrape annotations agree', async () => {
    const config = await loadConfig();
    const c = coordinator.container;
    const template = coordinator.workload.spec.template;
    expect(config.instances).toEqual([]); // the proxies register: pod IPs change
    expect(portNumber(c, 'http')).toBe(config.server.port);
    expect(portNumber(c, 'management')).toBe(config.management.port);
    expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/health' });
    expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/ready' });
    expect(portNumber(c, c.livenessProbe!.httpGet!.port)).toBe(config.server.port);
    expect(portNumber(c, c.readinessProbe!.httpGet!.port)).toBe(config.server.port);
    expect(template.metadata.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(config.server.port),
      'prometheus.io/path': '/metrics',
    });
    expect(coordinator.env[config.engineProxy.peerSecretEnv!]).toMatch(/^generated-for-test/);
    const front = services.find((s) => s.name === 'motor-coordinator')!;
    expect(selects(front.spec.selector, template.metadata.labels)).toBe(true);
    expect(portNumber(c, front.spec.ports[0]!.targetPort)).toBe(config.server.port);
  });

  it('the coordinator refuses the Secret as shipped (replace-me values), naming each', async () => {
    const shipped = containerEnv(coordinator.container, coordinator.pod, (kind, name, key) => {
      const m = manifests.find((x) => x.kind === kind && x.name === name)!;
      return (m.body.stringData as Record<string, string>)[key];
    });
    await expect(
      loadCoordinatorConfig(coordinator.parsed.opts, { ...process.env, ...shipped }),
    ).rejects.toThrow(/still the "replace-me…" example value[\s\S]*MOTOR_PEER_SECRET: peer secret #1: still/);
  });

  describe.each(proxies.map((p) => [`${p.workload.name}/${p.container.name}`, p] as const))(
    '%s',
    (_name, p) => {
      const opts = p.parsed.opts;
      const resolve = (): Promise<EngineProxyOptions | string> =>
        withEnv(p.env, () => resolveOptions(opts as unknown as Parameters<typeof resolveOptions>[0]));

      it('starts: Motor’s option resolver accepts its flags, env and engine config', async () => {
        const resolved = await resolve();
        expect(typeof resolved === 'string' ? resolved : 'ok').toBe('ok');
        expect((resolved as EngineProxyOptions).dispatchCapabilities.length).toBeGreaterThan(0);
        expect((resolved as EngineProxyOptions).engine).toBe(engineKind(p.engine));
      });

      it('reaches the engine beside it on loopback, at the port the engine serves', () => {
        const url = new URL(String(opts.engineUrl));
        expect(url.hostname).toBe('127.0.0.1');
        const enginePort = Number(url.port);
        expect(portNumber(p.engine!, 'engine')).toBe(enginePort);
        expect(Number(flagValues(p.engine!.args ?? [], '--port')[0])).toBe(enginePort);
      });

      it('listens where its container port, readiness probe and scrape annotation say', () => {
        expect(portNumber(p.container, 'proxy')).toBe(opts.port);
        expect(portNumber(p.container, p.container.readinessProbe?.httpGet?.port)).toBe(opts.port);
        expect(p.container.readinessProbe?.httpGet?.path).toBe('/health');
        expect(p.workload.spec.template.metadata.annotations).toMatchObject({
          'prometheus.io/scrape': 'true',
          'prometheus.io/port': String(opts.port),
          'prometheus.io/path': '/metrics',
        });
      });

      it('registers through a Service that reaches the coordinator’s management port, ready or not', async () => {
        const config = await loadConfig();
        const url = new URL(String(opts.register));
        const svc = services.find((s) => s.name === url.hostname);
        expect(svc, `Service ${url.hostname}`).toBeDefined();
        const port = svc!.spec.ports.find((x) => x.port === Number(url.port));
        expect(port, `Service ${svc!.name} port ${url.port}`).toBeDefined();
        expect(selects(svc!.spec.selector, coordinator.workload.spec.template.metadata.labels)).toBe(true);
        expect(portNumber(coordinator.container, port!.targetPort)).toBe(config.management.port);
        // a coordinator without instances is not ready, and gets none until a proxy registers
        expect(svc!.spec.publishNotReadyAddresses).toBe(true);
        expect(p.env.MOTOR_ADMIN_TOKEN).toBe(config.management.adminToken);
        expect(p.env.MOTOR_PEER_SECRET).toBe(coordinator.env[config.engineProxy.peerSecretEnv!]);
      });

      it('advertises an address other pods reach: its pod IP, or its pod’s name under a headless Service', () => {
        const url = new URL(String(opts.advertiseUrl));
        expect(Number(url.port)).toBe(opts.port);
        if (url.hostname === p.pod.ip) return;
        const [podName, serviceName] = url.hostname.split('.');
        expect(podName).toBe(p.pod.name);
        expect(p.workload.spec.serviceName).toBe(serviceName);
        const svc = services.find((s) => s.name === serviceName)!;
        expect(svc.spec).toMatchObject({ clusterIP: 'None', publishNotReadyAddresses: true });
        expect(selects(svc.spec.selector, p.workload.spec.template.metadata.labels)).toBe(true);
      });

      it('allows as peers exactly the pods of the other role beside the same engine kind', () => {
        const peers = (opts.peerAllow as string[]).map((entry) => {
          const m = /^http:\/\/(.+)-(\d+)\.([^.:]+):\*$/.exec(entry);
          expect(m, `--peer-allow ${entry}: http://<statefulset>-<n>.<service>:*`).not.toBeNull();
          const peer = proxies.find((q) => q.workload.kind === 'StatefulSet' && q.workload.name === m![1]);
          expect(peer, `--peer-allow ${entry}: a StatefulSet ${m![1]}`).toBeDefined();
          expect(peer!.workload.spec.serviceName).toBe(m![3]);
          expect(Number(m![2])).toBeLessThan(peer!.workload.spec.replicas ?? 1);
          return peer!;
        });
        // SGLang's decode asks its prefill's proxy for the bootstrap address: it needs the list
        if (engineKind(p.engine) === 'sglang') expect(peers.length).toBeGreaterThan(0);
        for (const peer of peers) {
          expect(engineKind(peer.engine)).toBe(engineKind(p.engine));
          expect(peer.parsed.opts.role).not.toBe(opts.role);
        }
      });

      it('the engine keeps serving while the proxy drains, and the pod is given the time', () => {
        const drainMs = Number(opts.drainTimeoutMs);
        const grace = p.workload.spec.template.spec.terminationGracePeriodSeconds ?? 30;
        const engineWait = p.engine!.lifecycle?.preStop?.sleep?.seconds ?? 0;
        expect(engineWait * 1000).toBeGreaterThanOrEqual(drainMs);
        expect(grace).toBeGreaterThan(engineWait);
      });

      it('agrees with its engine’s own launch flags', () => {
        const engineArgs = (p.engine!.args ?? []).map((a) => expandRefs(a, engineEnv(p)));
        if (engineKind(p.engine) === 'vllm') {
          // the proxy's --engine-config names the connector the engine runs (it decides the capability)
          const proxyConfig = JSON.parse(readFileSync(String(opts.engineConfig), 'utf8')) as {
            kv_transfer_config: { kv_connector: string };
          };
          const engineConfig = JSON.parse(flagValues(engineArgs, '--kv-transfer-config')[0]!) as {
            kv_connector: string;
          };
          expect(engineConfig.kv_connector).toBe(proxyConfig.kv_transfer_config.kv_connector);
          expect(engineEnv(p).VLLM_NIXL_SIDE_CHANNEL_HOST).toBe(p.pod.ip);
        } else {
          expect(flagValues(engineArgs, '--disaggregation-mode')).toEqual([opts.role]);
          if (opts.role === 'prefill') {
            expect(flagValues(engineArgs, '--disaggregation-bootstrap-port').map(Number)).toEqual([
              opts.bootstrapPort,
            ]);
            expect(opts.bootstrapHost).toBe(p.pod.ip);
          }
        }
      });
    },
  );
});

/** The engine a proxy sits beside, from its launch command. */
function engineKind(engine: Container | undefined): string {
  const command = (engine?.command ?? []).join(' ');
  if (command === 'vllm serve') return 'vllm';
  if (command === 'python3 -m sglang.launch_server') return 'sglang';
  return `unknown engine command '${command}'`;
}

function engineEnv(p: MotorContainer): Record<string, string> {
  return containerEnv(p.engine!, p.pod, lookup);
}
