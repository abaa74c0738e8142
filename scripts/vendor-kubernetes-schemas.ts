/**
 * Writes test/fixtures/kubernetes/api-schemas.json: the Kubernetes API object schemas that
 * deploy/kubernetes/ uses, as JSON Schema, for test/kubernetes.test.ts.
 *
 *   tsx scripts/vendor-kubernetes-schemas.ts <swagger.json>
 *
 * Input: Kubernetes' own OpenAPI v2 document (kubernetes/kubernetes api/openapi-spec/swagger.json). The
 * copy used is the one kubernetes-client/python vendors as kubernetes/swagger.json.unprocessed (taken
 * from the release-1.36 branch, per its scripts/constants.py KUBERNETES_BRANCH) at commit
 * 024658493d124f046fc0a9827a2a3165cf2aee28: the kubernetes repository itself is too large to bring here.
 *
 * Only what the manifests need is kept: the kinds below and every definition they reach. Descriptions
 * and the x-kubernetes-* merge hints are dropped (validation does not read them). Four rewrites turn
 * OpenAPI's looser notation into what the API server enforces (as kubeconform's "strict" schemas do):
 *  - an object with declared properties accepts no others (the API server's strict field validation,
 *    `kubectl apply --validate=strict`, refuses unknown fields: a typo fails instead of vanishing);
 *  - IntOrString (declared `type: string, format: int-or-string`) accepts an integer too;
 *  - Quantity (declared `type: string`) accepts a number too (YAML `cpu: 1`), and strings only in the
 *    grammar its own description gives;
 *  - `format: int32` becomes its bounds (a port of 99999 fails); other formats are dropped;
 *  - a kind's `apiVersion` and `kind` must be its own (from x-kubernetes-group-version-kind).
 */
import { readFileSync, writeFileSync } from 'node:fs';

/** The kinds deploy/kubernetes/ may use; a manifest of any other kind fails the test until added here. */
const KINDS = [
  'io.k8s.api.apps.v1.Deployment',
  'io.k8s.api.apps.v1.StatefulSet',
  'io.k8s.api.core.v1.Service',
  'io.k8s.api.core.v1.Secret',
  'io.k8s.api.core.v1.ConfigMap',
];
const SOURCE =
  'Kubernetes release-1.36 OpenAPI v2 (kubernetes/kubernetes api/openapi-spec/swagger.json), as vendored by ' +
  'kubernetes-client/python in kubernetes/swagger.json.unprocessed at commit ' +
  '024658493d124f046fc0a9827a2a3165cf2aee28; reduced and rewritten by scripts/vendor-kubernetes-schemas.ts';
const INT_OR_STRING = 'io.k8s.apimachinery.pkg.util.intstr.IntOrString';
const QUANTITY = 'io.k8s.apimachinery.pkg.api.resource.Quantity';
// <signedNumber><suffix>, suffix = binarySI (Ki…Ei) | decimalSI (m, k, M, G, T, P, E, or none) |
// decimalExponent (e|E <signedNumber>): the grammar in Quantity's own description.
const QUANTITY_PATTERN =
  '^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([KMGTPE]i|[mkMGTPE]|[eE][+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+))?$';

type Schema = { [key: string]: unknown };
const REF_PREFIX = '#/definitions/';

function rewrite(node: unknown, reached: Set<string>): unknown {
  if (Array.isArray(node)) return node.map((n) => rewrite(n, reached));
  if (node === null || typeof node !== 'object') return node;
  const out: Schema = {};
  for (const [key, value] of Object.entries(node as Schema)) {
    if (key === 'description' || key.startsWith('x-kubernetes-')) continue;
    if (key === 'format') {
      if (value === 'int32') Object.assign(out, { minimum: -(2 ** 31), maximum: 2 ** 31 - 1 });
      continue;
    }
    if (key === '$ref' && typeof value === 'string') reached.add(value.slice(REF_PREFIX.length));
    out[key] =
      key === 'properties'
        ? Object.fromEntries(Object.entries(value as Schema).map(([k, v]) => [k, rewrite(v, reached)]))
        : rewrite(value, reached);
  }
  if (out.properties !== undefined && out.additionalProperties === undefined)
    out.additionalProperties = false;
  return out;
}

function definitionOf(name: string, source: Schema, reached: Set<string>): Schema {
  if (name === INT_OR_STRING) return { oneOf: [{ type: 'string' }, { type: 'integer' }] };
  if (name === QUANTITY)
    return { oneOf: [{ type: 'string', pattern: QUANTITY_PATTERN }, { type: 'number' }] };
  const schema = rewrite(source, reached) as Schema;
  const gvk = (
    source['x-kubernetes-group-version-kind'] as { group: string; version: string; kind: string }[]
  )?.[0];
  if (KINDS.includes(name) && gvk) {
    const props = schema.properties as Schema;
    props.apiVersion = { const: gvk.group === '' ? gvk.version : `${gvk.group}/${gvk.version}` };
    props.kind = { const: gvk.kind };
    schema.required = [...new Set([...((schema.required as string[]) ?? []), 'apiVersion', 'kind'])];
  }
  return schema;
}

const [input] = process.argv.slice(2);
if (input === undefined) throw new Error('usage: tsx scripts/vendor-kubernetes-schemas.ts <swagger.json>');
const all = (JSON.parse(readFileSync(input, 'utf8')) as { definitions: Record<string, Schema> }).definitions;
const definitions: Record<string, Schema> = {};
const pending = [...KINDS];
while (pending.length > 0) {
  const name = pending.pop()!;
  if (definitions[name] !== undefined) continue;
  const source = all[name];
  if (source === undefined) throw new Error(`${input}: no definition ${name}`);
  const reached = new Set<string>();
  definitions[name] = definitionOf(name, source, reached);
  pending.push(...reached);
}
const kinds = Object.fromEntries(
  KINDS.map((name) => {
    const props = definitions[name]!.properties as Record<string, { const: string }>;
    return [`${props.apiVersion!.const} ${props.kind!.const}`, `${REF_PREFIX}${name}`];
  }),
);
const sorted = Object.fromEntries(Object.entries(definitions).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(
  'test/fixtures/kubernetes/api-schemas.json',
  `${JSON.stringify({ $comment: SOURCE, kinds, definitions: sorted }, null, 2)}\n`,
);
process.stdout.write(`${Object.keys(sorted).length} definitions, kinds: ${Object.keys(kinds).join(', ')}\n`);
