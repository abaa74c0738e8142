import { expect, it } from 'vitest';
import { stringifyWithBigInt } from './json-bigint.js';

it.each([
  [{ room: 9223372036854775807n }, '{"room":9223372036854775807}'],
  [{ a: [1n, 'x'] }, '{"a":[1,"x"]}'],
  [{ plain: 'no bigints', n: 1 }, '{"plain":"no bigints","n":1}'],
])('%o', (value, text) => expect(stringifyWithBigInt(value)).toBe(text));
