import { describe, expect, it } from 'vitest';
import { RestartBudget } from './restart-budget.js';

describe('RestartBudget', () => {
  it.each([
    ['within the budget', [0, 10, 20], [true, true, true]],
    ['one over the budget in the window', [0, 10, 20, 30], [true, true, true, false]],
    ['the window slides', [0, 10, 20, 1000, 1005], [true, true, true, true, false]],
    ['a refused restart is not counted', [0, 1, 2, 3, 999, 1001], [true, true, true, false, false, true]],
  ])('%s', (_what, times, expected) => {
    const budget = new RestartBudget(3, 1000);
    expect(times.map((t) => budget.take(t))).toEqual(expected);
  });
});
