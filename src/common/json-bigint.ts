import { randomBytes } from 'node:crypto';

// A per-process marker no client can guess, so client strings are never turned into numbers.
const MARKER = `__motor_bigint_${randomBytes(6).toString('hex')}__`;
const MARKER_PATTERN = new RegExp(`"${MARKER}(-?\\d+)"`, 'g');

/**
 * `JSON.stringify` that writes bigint values as exact JSON integers (e.g. a 63-bit SGLang
 * `bootstrap_room`), which plain `JSON.stringify` refuses and `Number` would round.
 */
export function stringifyWithBigInt(value: unknown): string {
  try {
    return JSON.stringify(value); // the common case, several times faster than with a replacer
  } catch (err) {
    if (!(err instanceof TypeError)) throw err; // "Do not know how to serialize a BigInt"
  }
  let sawBigInt = false;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'bigint') return v;
    sawBigInt = true;
    return `${MARKER}${v.toString()}`;
  });
  return sawBigInt ? text.replace(MARKER_PATTERN, '$1') : text;
}
