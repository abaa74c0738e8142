import { isUtf8 } from 'node:buffer';
import { stringifyWithBigInt } from './json-bigint.js';

/**
 * A JSON object's text kept next to its parsed value, so an object derived from it by changing a few
 * top-level keys is written by copying the unchanged members' bytes instead of serialising the whole
 * object again (issue 19: a 225 KB prompt's leg body cost one `JSON.stringify` per leg).
 */
export interface JsonSource {
  readonly bytes: Buffer;
  /** Per top-level member in text order: key start, just past the key, member end (json-shape.ts). */
  readonly spans: readonly number[];
  /** Each member's key, decoded. */
  readonly keys: readonly string[];
  /** Each key's value as parsed (the last member wins, as in `JSON.parse`). */
  readonly values: ReadonlyMap<string, unknown>;
}

const BACKSLASH = 0x5c;
const OPEN = Buffer.from('{');
const COMMA = Buffer.from(',');
/**
 * Most top-level members a source keeps: chat bodies have a dozen or two; a body with thousands of
 * top-level keys (issue 15 finding 7) is cheaper to serialise whole than to index key by key.
 */
const MAX_MEMBERS = 1024;

/**
 * The source of `value`, parsed from `bytes` whose members `checkJsonShape` listed; null when the
 * bytes cannot stand for the value: not an object, or not valid UTF-8 (the parser replaced bad
 * sequences with U+FFFD, which a re-serialisation sends and a copy would not), or more than
 * `MAX_MEMBERS` top-level members.
 */
export function jsonSource(bytes: Buffer, spans: readonly number[], value: unknown): JsonSource | null {
  if (spans.length === 0 || spans.length > 3 * MAX_MEMBERS) return null;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  if (!isUtf8(bytes)) return null;
  const keys: string[] = [];
  const values = new Map<string, unknown>();
  const object = value as Record<string, unknown>;
  for (let m = 0; m < spans.length; m += 3) {
    const start = spans[m]!;
    const end = spans[m + 1]!;
    let escaped = false;
    for (let i = start + 1; i < end - 1 && !escaped; i++) escaped = bytes[i] === BACKSLASH;
    const key = escaped
      ? (JSON.parse(bytes.toString('utf8', start, end)) as string)
      : bytes.toString('utf8', start + 1, end - 1);
    keys.push(key);
    values.set(key, object[key]);
  }
  return { bytes, spans, keys, values };
}

/**
 * `object` as JSON text, written from `source` where they agree: every member of the source whose
 * key `object` still has with the very same value (`===`: unchanged, not re-parsed) is copied as
 * bytes, in the source's order; every key of `object` that is new or changed is serialised after
 * them; a key `object` lacks is left out. Parses to what `JSON.stringify(object)` parses to, with
 * key order and number spelling the client's. Nested values are compared by identity, so the
 * derived object must not change the source's nested objects in place (copy, then change).
 *
 * The text comes as the buffers that make it, in order, never joined whole (issue 19: joining a
 * 225 KB prompt's leg cost a fresh allocation, ~60-77 first-touch page faults, per leg): each run
 * of kept members of `VIEW_MIN` bytes or more is a view of `source.bytes` (which must then stay
 * unchanged while the buffers are in use: the client's body bytes are never reused), and the text
 * between views (braces, commas, shorter runs, the serialised members) is joined into one small
 * buffer each. A chat body whose messages are kept splits into a view or two and a short tail.
 */
export function spliceJson(source: JsonSource, object: Record<string, unknown>): Buffer[] {
  const { bytes, spans, keys, values } = source;
  const parts: Buffer[] = [];
  const pending: Buffer[] = []; // text since the last view, joined into one buffer before the next
  let first = true; // no member written yet
  let runStart = -1; // runs of consecutive kept members are copied at once (the commas between them included)
  let runEnd = -1;
  for (let m = 0, k = 0; m <= spans.length; m += 3, k++) {
    const key = keys[k];
    if (key !== undefined && Object.hasOwn(object, key) && object[key] === values.get(key)) {
      if (runStart === -1) runStart = spans[m]!;
      runEnd = spans[m + 2]!;
      continue;
    }
    if (runStart === -1) continue;
    const separator = first ? OPEN : COMMA;
    first = false;
    if (runEnd - runStart < VIEW_MIN) {
      pending.push(separator, bytes.subarray(runStart, runEnd));
    } else {
      // a view takes its `{` or `,` from the client's bytes when it stands right before the run
      if (bytes[runStart - 1] === separator[0]) runStart--;
      else pending.push(separator);
      if (pending.length > 0) parts.push(joined(pending));
      parts.push(bytes.subarray(runStart, runEnd));
    }
    runStart = -1;
  }
  let added = first ? '{' : '';
  for (const key in object) {
    if (!Object.hasOwn(object, key)) continue;
    const v = object[key];
    if (values.has(key) && values.get(key) === v) continue;
    const text = v === undefined || typeof v === 'function' ? undefined : stringifyWithBigInt(v);
    if (text === undefined) continue; // as JSON.stringify: undefined members are left out
    added += `${first ? '' : ','}${JSON.stringify(key)}:${text}`;
    first = false;
  }
  pending.push(Buffer.from(`${added}}`));
  parts.push(joined(pending));
  return parts;
}

/** The pieces as one buffer (emptying the list). */
function joined(pieces: Buffer[]): Buffer {
  const out = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  pieces.length = 0;
  return out;
}

/**
 * Runs shorter than this are joined with the text around them, not sent as views: undici writes
 * each buffer of a list with its own socket write (upstream.ts).
 */
const VIEW_MIN = 1024;
