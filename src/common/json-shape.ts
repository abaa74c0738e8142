/** Bounds on a JSON text's shape, checked on its bytes before it is parsed. */
export interface JsonShapeLimits {
  /** Deepest nesting of arrays/objects (the top-level container is level 1); `Infinity` = any. */
  readonly maxDepth: number;
  /** Most object keys in the whole text (every `"k":` counts); `Infinity` = any. */
  readonly maxKeys: number;
}

/** `ok`, or the first bound the text exceeds. */
export type JsonShapeVerdict = 'ok' | 'too_deep' | 'too_many_keys';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** Byte → what it is outside a string (0: nothing the scan counts), so most bytes cost one lookup. */
const OTHER = 0;
const STRING = 1;
const KEY = 2;
const OPEN = 3;
const CLOSE = 4;
const COMMA = 5;
const CLASS = new Uint8Array(256);
CLASS[QUOTE] = STRING;
CLASS[0x2c] = COMMA; // ','
CLASS[0x3a] = KEY; // ':'
CLASS[0x7b] = CLASS[0x5b] = OPEN; // '{' '['
CLASS[0x7d] = CLASS[0x5d] = CLOSE; // '}' ']'

/**
 * One pass over the bytes of a JSON text, outside strings, counting nesting and keys (a `:` outside
 * a string is a key separator), so a body that would cost seconds to parse and walk is refused
 * before `JSON.parse`: hundreds of thousands of keys (issue 15 finding 7) or thousands of levels.
 * String contents are skipped with `indexOf` (native), so an ordinary body full of prompt text
 * costs little. Exact for valid JSON; on invalid JSON the verdict does not matter (the parser
 * refuses it next).
 *
 * `members`, when given and the text is an object, receives three offsets per top-level member in
 * text order (issue 19: leg bodies are spliced from the client's bytes, json-splice.ts): where its
 * key's opening quote is, just past its key's closing quote, and where the member ends (the `,` or
 * `}` after its value). Filled in the same pass; only meaningful when the text is valid JSON.
 */
export function checkJsonShape(buf: Buffer, limits: JsonShapeLimits, members?: number[]): JsonShapeVerdict {
  const { maxDepth, maxKeys } = limits;
  const end = buf.length;
  let depth = 0;
  let keys = 0;
  // 1: the top-level object expects a key next; 2: inside a member; 0: not tracking
  let top = 0;
  for (let i = 0; i < end; i++) {
    const kind = CLASS[buf[i]!]!;
    if (kind === OTHER) continue;
    if (kind === STRING) {
      const close = closingQuote(buf, i + 1);
      if (top === 1 && depth === 1) {
        members!.push(i, close + 1);
        top = 2;
      }
      i = close;
    } else if (kind === KEY) {
      if (++keys > maxKeys) return 'too_many_keys';
    } else if (kind === OPEN) {
      if (++depth > maxDepth) return 'too_deep';
      if (depth === 1 && members !== undefined && buf[i] === 0x7b) top = 1;
    } else if (kind === CLOSE) {
      if (depth === 1 && top !== 0) {
        if (top === 2) members!.push(i);
        top = 0; // the top-level object ended: nothing after it is a member
        members = undefined;
      }
      depth--;
    } else if (depth === 1 && top === 2) {
      members!.push(i); // COMMA ending a top-level member
      top = 1;
    }
  }
  return 'ok';
}

/** Index of the quote closing a string whose contents start at `from` (or the end of the text). */
function closingQuote(buf: Buffer, from: number): number {
  let at = buf.indexOf(QUOTE, from);
  while (at !== -1) {
    let backslashes = 0;
    while (at - backslashes - 1 >= from && buf[at - backslashes - 1] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = buf.indexOf(QUOTE, at + 1);
  }
  return buf.length;
}
