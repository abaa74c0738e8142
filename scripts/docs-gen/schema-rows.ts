import { code } from './markdown-table.js';

/** The parts of a JSON Schema (as zod's `toJSONSchema` writes it) that the reference tables show. */
export interface SchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  enum?: readonly unknown[];
  anyOf?: readonly SchemaNode[];
  properties?: Readonly<Record<string, SchemaNode>>;
  required?: readonly string[];
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  format?: string;
}

/** One documented key: its dotted path (`instances[].url`), type, default and description. */
export interface KeyRow {
  path: string;
  type: string;
  default: string;
  description: string;
}

export interface RowOptions {
  /** Default column text by path, for keys whose default comes from elsewhere. */
  defaultOverrides?: Readonly<Record<string, string>>;
}

const isObject = (node: SchemaNode): boolean => node.properties !== undefined;

/** Bounds at the safe-integer limits are zod's `z.int()` range, not a documented limit. */
const bound = (n: number | undefined): number | undefined =>
  n !== undefined && Math.abs(n) < Number.MAX_SAFE_INTEGER ? n : undefined;

function numberRange(node: SchemaNode): string {
  const max = bound(node.maximum);
  const min = bound(node.minimum);
  if (min !== undefined && max !== undefined) return ` ${min}–${max}`;
  if (min !== undefined) return ` ≥ ${min}`;
  if (node.exclusiveMinimum !== undefined) return ` > ${node.exclusiveMinimum}`;
  if (max !== undefined) return ` ≤ ${max}`;
  return '';
}

/** A short human type: `integer 0–65535`, `URL`, `` `a`, `b` ``, `string[]`, `integer or null`. */
export function typeOf(node: SchemaNode): string {
  if (node.enum) return node.enum.map((v) => code(String(v))).join(', ');
  if (node.anyOf) {
    const types = node.anyOf.map((n) => (n.type === 'null' ? 'null' : typeOf(n)));
    return types.join(' or ');
  }
  switch (node.type) {
    case 'integer':
    case 'number':
      return `${node.type}${numberRange(node)}`;
    case 'string':
      return node.format === 'uri' ? 'URL' : 'string';
    case 'array':
      return node.items ? `list of ${typeOf(node.items)}` : 'list';
    case 'object':
      return isObject(node) ? 'object' : 'map';
    case undefined:
      return 'any';
    default:
      return node.type;
  }
}

function defaultOf(node: SchemaNode, required: boolean): string {
  if (node.default !== undefined) {
    const isEmptyObject =
      typeof node.default === 'object' && node.default !== null && Object.keys(node.default).length === 0;
    if (typeof node.default === 'string') return code(node.default);
    if (!(isEmptyObject && !Array.isArray(node.default))) return code(JSON.stringify(node.default));
  }
  return required ? 'required' : '—';
}

/** The node with every `default` removed: siblings with equal shapes are documented once. */
function shapeKey(node: SchemaNode): string {
  return JSON.stringify(node, (key, value: unknown) => (key === 'default' ? undefined : value));
}

/** Groups object-valued sibling keys of identical shape (e.g. the three role profiles). */
function siblingGroups(properties: Readonly<Record<string, SchemaNode>>): string[][] {
  const groups = new Map<string, string[]>();
  for (const [key, child] of Object.entries(properties)) {
    const id = isObject(child) ? shapeKey(child) : `leaf:${key}`;
    const group = groups.get(id);
    if (group) group.push(key);
    else groups.set(id, [key]);
  }
  return [...groups.values()];
}

/** Rows of several same-shaped subtrees as one: differing defaults are listed per key. */
function mergeRows(
  keys: readonly string[],
  perKey: readonly KeyRow[][],
  firstPath: string,
  mergedPath: string,
): KeyRow[] {
  return perKey[0]!.map((row, i) => {
    const defaults = perKey.map((rows) => rows[i]!.default);
    const same = defaults.every((d) => d === defaults[0]);
    return {
      ...row,
      path: mergedPath + row.path.slice(firstPath.length),
      default: same ? defaults[0]! : keys.map((k, j) => `${k}: ${defaults[j]}`).join('; '),
    };
  });
}

/**
 * Every key below `node` as a table row, depth first in schema order. Objects and lists of objects get
 * a row of their own when they carry a description, then one row per key inside.
 */
export function keyRows(
  node: SchemaNode,
  path: string,
  options: RowOptions = {},
  required = false,
): KeyRow[] {
  const own = (): KeyRow => ({
    path,
    type: typeOf(node),
    default: options.defaultOverrides?.[path] ?? defaultOf(node, required),
    description: node.description ?? '',
  });
  if (isObject(node)) {
    const rows: KeyRow[] = path !== '' && node.description ? [own()] : [];
    for (const keys of siblingGroups(node.properties!)) {
      const childPath = (k: string): string => (path === '' ? k : `${path}.${k}`);
      const perKey = keys.map((k) =>
        keyRows(node.properties![k]!, childPath(k), options, node.required?.includes(k) ?? false),
      );
      if (keys.length === 1) rows.push(...perKey[0]!);
      else rows.push(...mergeRows(keys, perKey, childPath(keys[0]!), childPath(`{${keys.join(',')}}`)));
    }
    return rows;
  }
  if (node.type === 'array' && node.items && isObject(node.items)) {
    return [{ ...own(), type: 'list of objects' }, ...keyRows(node.items, `${path}[]`, options)];
  }
  return [own()];
}
