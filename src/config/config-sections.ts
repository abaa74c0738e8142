import type { z } from 'zod';
import { didYouMean, nearest } from '../common/did-you-mean.js';

/**
 * Section-by-section parsing of a config object, so that one bad section never hides the issues of
 * the others, nor the checks that run on the sections that did parse (issue 18 item 6: every error at
 * once). Arrays named in `elementwise` are parsed entry by entry: the good entries are kept with their
 * index, for the checks that look at each entry.
 */

/** `a.b[2].c`, or `(root)`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path)
    out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`;
  return out === '' ? '(root)' : out;
}

/**
 * One zod issue as `path: message`, the path under `prefix`. With `input` (the value the issue's path
 * starts from), a bad enum value is echoed with the allowed set and the nearest, and an unknown key
 * gets the nearest known key of its object (`instance` → `instances`).
 */
export function issueLine(
  issue: z.core.$ZodIssue,
  prefix: readonly PropertyKey[] = [],
  input?: unknown,
  knownKeys?: readonly string[],
): string {
  let message: string;
  if (issue.code === 'unrecognized_keys') {
    message = `unknown key(s) ${issue.keys.map((k) => `'${k}'${suggestKey(k, knownKeys)}`).join(', ')}`;
  } else if (issue.code === 'invalid_value' && input !== undefined) {
    const bad = valueAt(input, issue.path);
    const allowed = issue.values.map(String);
    message =
      `${JSON.stringify(bad)} is not one of ${allowed.join(', ')}` +
      (typeof bad === 'string' ? didYouMean(bad, allowed) : '');
  } else {
    message = issue.message.replace(/^Invalid (input|option): /, '');
  }
  return `${formatPath([...prefix, ...issue.path])}: ${message}`;
}

function suggestKey(key: string, known: readonly string[] | undefined): string {
  const match = known === undefined ? undefined : nearest(key, known);
  return match === undefined ? '' : ` (did you mean '${match}'?)`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

export interface ParsedSections<T> {
  /** Every section that parsed (all of them when `issues` is empty). */
  data: Partial<T>;
  /** Entries of the `elementwise` arrays that parsed, with their index in the input. */
  entries: Partial<Record<keyof T, { value: unknown; index: number }[]>>;
  issues: string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses each key of a strict object schema on its own; unknown keys are one `(root)` issue. */
export function parseSections<S extends z.ZodObject>(
  schema: S,
  raw: unknown,
  elementwise: Partial<Record<keyof S['shape'], z.ZodType>> = {},
): ParsedSections<z.output<S>> {
  const out: ParsedSections<z.output<S>> = { data: {}, entries: {}, issues: [] };
  if (!isRecord(raw)) {
    out.issues.push('(root): expected object');
    return out;
  }
  const shape = schema.shape as Record<string, z.ZodType>;
  const data = out.data as Record<string, unknown>;
  for (const [key, section] of Object.entries(shape)) {
    const value = raw[key];
    const entrySchema = (elementwise as Record<string, z.ZodType | undefined>)[key];
    if (entrySchema !== undefined && Array.isArray(value)) {
      const good: { value: unknown; index: number }[] = [];
      value.forEach((entry, index) => {
        const parsed = entrySchema.safeParse(entry);
        if (parsed.success) good.push({ value: parsed.data, index });
        else out.issues.push(...parsed.error.issues.map((i) => issueLine(i, [key, index], entry)));
      });
      (out.entries as Record<string, unknown>)[key] = good;
      if (good.length === value.length) data[key] = good.map((g) => g.value);
      continue;
    }
    const parsed = section.safeParse(value);
    if (parsed.success) data[key] = parsed.data;
    else out.issues.push(...parsed.error.issues.map((i) => issueLine(i, [key], value)));
  }
  // last, as zod reports them
  const unknown = Object.keys(raw).filter((k) => !(k in shape));
  if (unknown.length > 0)
    out.issues.push(
      `(root): unknown key(s) ${unknown.map((k) => `'${k}'${suggestKey(k, Object.keys(shape))}`).join(', ')}`,
    );
  return out;
}
