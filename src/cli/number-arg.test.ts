import { InvalidArgumentError } from 'commander';
import { expect, it } from 'vitest';
import { numberArg, type NumberArgRule } from './number-arg.js';

it.each<[NumberArgRule, string, number | string]>([
  [{}, '1.5', 1.5],
  [{}, '0', 0],
  [{}, '-1', '--x must be a number ≥ 0'],
  [{}, '', '--x must be a number ≥ 0'],
  [{}, 'abc', '--x must be a number ≥ 0'],
  [{ min: -1 }, '-1', -1],
  [{ integer: true }, '3', 3],
  [{ integer: true }, '3.5', '--x must be an integer ≥ 0'],
  [{ integer: true, max: 64 }, '65', '--x must be an integer ≥ 0 and ≤ 64'],
  [{ exclusiveMin: true }, '0', '--x must be a number > 0'],
  [{ exclusiveMin: true }, '0.1', 0.1],
])('%o %j → %s', (rule, value, expected) => {
  const parse = numberArg('--x', rule);
  if (typeof expected === 'number') expect(parse(value)).toBe(expected);
  else expect(() => parse(value)).toThrow(new InvalidArgumentError(expected));
});
