import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { parseAllDocuments } from 'yaml';

/**
 * Readers for deploy/kubernetes/: the manifests, their schema check, and what the kubelet would hand
 * each container (env values, `$(VAR)` expansion in args, mounted ConfigMap files), so
 * test/kubernetes.test.ts can check the containers' command lines with Motor's own parsers.
 */

export interface Manifest {
  /** Path below deploy/kubernetes/. */
  file: string;
  apiVersion: string;
  kind: string;
  name: string;
  body: Record<string, unknown>;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    secretKeyRef?: { name: string; key: string };
    configMapKeyRef?: { name: string; key: string };
  };
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
}

export interface Probe {
  httpGet?: { path: string; port: string | number };
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: ContainerPort[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  volumeMounts?: { name: string; mountPath: string }[];
}

export interface PodTemplate {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    containers: Container[];
    terminationGracePeriodSeconds?: number;
    volumes?: { name: string; configMap?: { name: string; items?: { key: string; path: string }[] } }[];
  };
}

export interface Workload extends Manifest {
  spec: { replicas?: number; serviceName?: string; template: PodTemplate };
}

export interface ServiceSpec {
  clusterIP?: string;
  publishNotReadyAddresses?: boolean;
  selector: Record<string, string>;
  ports: { name?: string; port: number; targetPort?: string | number }[];
}

/** Every document of every `*.yaml` below `dir`, in file order. */
export function readManifests(dir: string): Manifest[] {
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  return files.flatMap((f) =>
    parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((doc, i) => {
      if (doc.errors.length > 0) throw new Error(`${f} document ${i + 1}: ${doc.errors[0]!.message}`);
      const body = doc.toJS() as Record<string, unknown>;
      const meta = body.metadata as { name?: string } | undefined;
      return {
        file: relative(dir, join(dir, f)),
        apiVersion: String(body.apiVersion),
        kind: String(body.kind),
        name: String(meta?.name),
        body,
      };
    }),
  );
}

/** The vendored Kubernetes schemas (test/fixtures/kubernetes/api-schemas.json): kind → validator. */
export function kubernetesValidator(
  schemaFile: string,
): (m: Pick<Manifest, 'apiVersion' | 'kind' | 'body'>) => string[] {
  const doc = JSON.parse(readFileSync(schemaFile, 'utf8')) as {
    kinds: Record<string, string>;
    definitions: Record<string, unknown>;
  };
  // strict: a keyword the vendored schemas carry that Ajv does not know is an error, not ignored
  const ajv = new Ajv({ allErrors: true, strict: true });
  ajv.addSchema({ $id: 'k8s', definitions: doc.definitions });
  return (m) => {
    const ref = doc.kinds[`${m.apiVersion} ${m.kind}`];
    if (ref === undefined)
      return [`no schema for ${m.apiVersion} ${m.kind} (scripts/vendor-kubernetes-schemas.ts)`];
    const validate = ajv.getSchema(`k8s${ref}`) ?? ajv.compile({ $ref: `k8s${ref}` });
    return validate(m.body) ? [] : (validate.errors ?? []).map(errorText);
  };
}

function errorText(e: ErrorObject): string {
  const extra =
    e.keyword === 'additionalProperties'
      ? ` '${(e.params as { additionalProperty: string }).additionalProperty}'`
      : '';
  return `${e.instancePath || '/'} ${e.message ?? e.keyword}${extra}`;
}

/** What the kubelet sets from `fieldRef` (the pod's own facts), for a stand-in pod. */
export interface PodFacts {
  name: string;
  ip: string;
}

/**
 * A container's environment as the kubelet builds it: literal values with `$(VAR)` of earlier
 * variables expanded, `fieldRef`, and Secret / ConfigMap keys (a missing one throws: the pod would
 * not start).
 */
export function containerEnv(
  container: Container,
  pod: PodFacts,
  lookup: (kind: 'Secret' | 'ConfigMap', name: string, key: string) => string | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const v of container.env ?? []) {
    const from = v.valueFrom;
    let value: string | undefined;
    if (v.value !== undefined) value = expandRefs(v.value, env);
    else if (from?.fieldRef)
      value = { 'status.podIP': pod.ip, 'metadata.name': pod.name }[from.fieldRef.fieldPath];
    else if (from?.secretKeyRef) value = lookup('Secret', from.secretKeyRef.name, from.secretKeyRef.key);
    else if (from?.configMapKeyRef)
      value = lookup('ConfigMap', from.configMapKeyRef.name, from.configMapKeyRef.key);
    if (value === undefined) throw new Error(`${container.name}: env ${v.name} has no value source here`);
    env[v.name] = value;
  }
  return env;
}

/**
 * Kubernetes' `$(VAR)` expansion in command, args and env values: a defined variable is replaced,
 * `$$` escapes, an undefined reference stays as written (so the test sees it).
 */
export function expandRefs(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string | undefined) =>
    name === undefined ? '$' : (env[name] ?? whole),
  );
}

/** The value after `flag` in a command line (`--flag value` or `--flag=value`), every occurrence. */
export function flagValues(words: readonly string[], flag: string): string[] {
  const out: string[] = [];
  words.forEach((w, i) => {
    if (w === flag && words[i + 1] !== undefined) out.push(words[i + 1]!);
    else if (w.startsWith(`${flag}=`)) out.push(w.slice(flag.length + 1));
  });
  return out;
}

/** A container port by number or name. */
export function portNumber(container: Container, port: string | number | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** Whether a Service or a selector picks pods with these labels. */
export function selects(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}
