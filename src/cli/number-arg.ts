import { InvalidArgumentError } from 'commander';

export interface NumberArgRule {
  integer?: boolean;
  min?: number;
  max?: number;
  /** `min` itself is refused (e.g. "> 0"). */
  exclusiveMin?: boolean;
}

/** A commander parser for a numeric flag: one validation and one error wording for every command. */
export function numberArg(name: string, rule: NumberArgRule = {}): (value: string) => number {
  const { integer = false, min = 0, max = Infinity, exclusiveMin = false } = rule;
  const range = `${exclusiveMin ? '>' : '≥'} ${min}${max < Infinity ? ` and ≤ ${max}` : ''}`;
  const expected = `${name} must be ${integer ? 'an integer' : 'a number'} ${range}`;
  return (value) => {
    const n = Number(value);
    const inRange = (exclusiveMin ? n > min : n >= min) && n <= max;
    if (value.trim() === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n)) || !inRange) {
      throw new InvalidArgumentError(expected);
    }
    return n;
  };
}

export const numArg = (name: string, min = 0): ((value: string) => number) => numberArg(name, { min });

export const intArg = (name: string, min = 0, max = Infinity): ((value: string) => number) =>
  numberArg(name, { integer: true, min, max });
