import { isPlainObject } from '../common/http.js';

/** Draws the words and choices of an instance; the simulator seeds it from the request. */
export interface InstanceSource {
  /** A float in [0, 1). */
  next(): number;
  /** A short lowercase word (no spaces), e.g. from the simulator's output vocabulary. */
  word(): string;
}

/** A schema the generator cannot satisfy (a `$ref` it cannot resolve, `not`, contradictory bounds). */
export class SchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaError';
  }
}

type Schema = Record<string, unknown>;

/** Deeper than any schema a client sends; a `$ref` cycle that has to recurse stops here. */
const MAX_DEPTH = 32;

/**
 * A deterministic, minimal instance valid against a JSON schema (the subset tool `parameters` and
 * `response_format.json_schema` use: type, properties, required, enum, const, items, min/maxItems,
 * min/maxLength, minimum/maximum/exclusive*, multipleOf, anyOf/oneOf/allOf, local `$ref`, nullable
 * type lists). Minimal: only required properties, the fewest items, the smallest allowed number —
 * what a constrained decoder lets a model stop at soonest, and what validates. Strings are words
 * from `src` (so two requests with the same seed agree); `pattern` and `format` are not honoured.
 */
export function jsonInstance(schema: unknown, src: InstanceSource): unknown {
  const root = isPlainObject(schema) ? schema : {};
  return new Generator(root, src).value(root, 0);
}

class Generator {
  constructor(
    private readonly root: Schema,
    private readonly src: InstanceSource,
  ) {}

  value(schema: unknown, depth: number): unknown {
    if (schema === true || schema === undefined) return {};
    if (!isPlainObject(schema)) throw new SchemaError('a schema must be an object');
    if (depth > MAX_DEPTH) throw new SchemaError('schema nests too deeply (a $ref cycle?)');
    const s = this.resolve(schema);
    if ('const' in s) return s.const;
    if (Array.isArray(s.enum)) {
      if (s.enum.length === 0) throw new SchemaError('an empty enum has no instance');
      return s.enum[0];
    }
    if (Array.isArray(s.allOf) && s.allOf.length > 0) return this.value(mergeAll(s, s.allOf), depth + 1);
    const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : null;
    if (alternatives !== null && alternatives.length > 0) return this.value(alternatives[0], depth + 1);
    switch (typeOf(s)) {
      case 'object':
        return this.object(s, depth);
      case 'array':
        return this.array(s, depth);
      case 'string':
        return this.string(s);
      case 'integer':
        return integer(s);
      case 'number':
        return number(s);
      case 'boolean':
        return this.src.next() < 0.5;
      case 'null':
        return null;
    }
  }

  /** A local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`) replaced by its target, merged with siblings. */
  private resolve(s: Schema): Schema {
    let cur = s;
    for (let hops = 0; typeof cur.$ref === 'string'; hops++) {
      if (hops > MAX_DEPTH) throw new SchemaError('a $ref cycle');
      const { $ref, ...rest } = cur;
      const target = pointer(this.root, $ref as string);
      cur = { ...target, ...rest };
    }
    return cur;
  }

  private object(s: Schema, depth: number): Record<string, unknown> {
    const props = isPlainObject(s.properties) ? s.properties : {};
    const required = Array.isArray(s.required) ? s.required.filter((k) => typeof k === 'string') : [];
    const out: Record<string, unknown> = {};
    for (const key of required) out[key] = this.value(props[key] ?? {}, depth + 1);
    const min = typeof s.minProperties === 'number' ? s.minProperties : 0;
    for (const key of Object.keys(props)) {
      if (Object.keys(out).length >= min) break;
      if (!(key in out)) out[key] = this.value(props[key], depth + 1);
    }
    return out;
  }

  private array(s: Schema, depth: number): unknown[] {
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : [];
    const min = typeof s.minItems === 'number' ? s.minItems : 0;
    const out: unknown[] = [];
    for (let i = 0; i < Math.max(min, 0); i++) {
      out.push(this.value(i < prefix.length ? prefix[i] : (s.items ?? {}), depth + 1));
    }
    return out;
  }

  private string(s: Schema): string {
    const min = typeof s.minLength === 'number' ? s.minLength : 0;
    const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
    if (max < min) throw new SchemaError('maxLength is below minLength');
    let out = this.src.word();
    while (out.length < min) out += this.src.word();
    return out.slice(0, max);
  }
}

function pointer(root: Schema, ref: string): Schema {
  if (!ref.startsWith('#')) throw new SchemaError(`only local $ref are supported, got ${ref}`);
  let cur: unknown = root;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    cur = isPlainObject(cur) ? cur[key] : undefined;
  }
  if (!isPlainObject(cur)) throw new SchemaError(`$ref ${ref} does not resolve`);
  return cur;
}

/** allOf: the schemas' keywords merged (properties and required united), enough for the common use. */
function mergeAll(s: Schema, parts: unknown[]): Schema {
  const { allOf: _drop, ...base } = s;
  const out: Schema = { ...base };
  for (const p of parts) {
    if (!isPlainObject(p)) continue;
    for (const [k, v] of Object.entries(p)) {
      if (k === 'properties' && isPlainObject(v)) {
        out.properties = { ...(isPlainObject(out.properties) ? out.properties : {}), ...v };
      } else if (k === 'required' && Array.isArray(v)) {
        out.required = [...(Array.isArray(out.required) ? out.required : []), ...v];
      } else out[k] = v;
    }
  }
  return out;
}

type JsonType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean' | 'null';
const TYPES = new Set<string>(['object', 'array', 'string', 'integer', 'number', 'boolean', 'null']);

/** The instance type: `type` (a list: its first non-null entry), else implied by the keywords. */
function typeOf(s: Schema): JsonType {
  const t = Array.isArray(s.type) ? (s.type.find((x) => x !== 'null') ?? s.type[0]) : s.type;
  if (typeof t === 'string' && TYPES.has(t)) return t as JsonType;
  if (t !== undefined) throw new SchemaError(`unknown type ${JSON.stringify(t)}`);
  if ('properties' in s || 'required' in s) return 'object';
  if ('items' in s || 'prefixItems' in s) return 'array';
  if ('minLength' in s || 'maxLength' in s || 'pattern' in s) return 'string';
  if ('minimum' in s || 'maximum' in s) return 'number';
  return 'object';
}

function lowerBound(s: Schema): { value: number; exclusive: boolean } | null {
  if (typeof s.exclusiveMinimum === 'number') return { value: s.exclusiveMinimum, exclusive: true };
  if (typeof s.minimum === 'number') return { value: s.minimum, exclusive: s.exclusiveMinimum === true };
  return null;
}

function upperBound(s: Schema): { value: number; exclusive: boolean } | null {
  if (typeof s.exclusiveMaximum === 'number') return { value: s.exclusiveMaximum, exclusive: true };
  if (typeof s.maximum === 'number') return { value: s.maximum, exclusive: s.exclusiveMaximum === true };
  return null;
}

/** The integer nearest 0 within the bounds that is a multiple of `multipleOf`. */
function integer(s: Schema): number {
  const step = typeof s.multipleOf === 'number' && s.multipleOf > 0 ? s.multipleOf : 1;
  const lo = lowerBound(s);
  const hi = upperBound(s);
  let v = 0;
  if (lo !== null && (lo.exclusive ? v <= lo.value : v < lo.value)) {
    v = Math.ceil(lo.value / step) * step;
    if (lo.exclusive && v <= lo.value) v += step;
  } else if (hi !== null && (hi.exclusive ? v >= hi.value : v > hi.value)) {
    v = Math.floor(hi.value / step) * step;
    if (hi.exclusive && v >= hi.value) v -= step;
  }
  if (!Number.isInteger(v)) v = Math.ceil(v);
  if (hi !== null && (hi.exclusive ? v >= hi.value : v > hi.value))
    throw new SchemaError('no integer fits the bounds');
  return v;
}

/** The number nearest 0 within the bounds (an exclusive bound: 1 past it, or halfway). */
function number(s: Schema): number {
  if (typeof s.multipleOf === 'number') return integer(s);
  const lo = lowerBound(s);
  const hi = upperBound(s);
  if (lo !== null && (lo.exclusive ? 0 <= lo.value : 0 < lo.value)) {
    if (!lo.exclusive) return lo.value;
    const up = hi === null ? lo.value + 1 : Math.min(lo.value + 1, (lo.value + hi.value) / 2);
    return up;
  }
  if (hi !== null && (hi.exclusive ? 0 >= hi.value : 0 > hi.value)) {
    if (!hi.exclusive) return hi.value;
    return lo === null ? hi.value - 1 : Math.max(hi.value - 1, (lo.value + hi.value) / 2);
  }
  return 0;
}
