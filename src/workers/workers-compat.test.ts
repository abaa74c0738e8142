import { describe, expect, it } from 'vitest';
import { workersProblem } from './workers-compat.js';

describe('workersProblem', () => {
  const memory = { store: 'memory' } as const;
  const etcd = { store: 'etcd' } as unknown as { store: 'memory' };
  it.each([
    ['one process, management on a memory registry', 1, 0, memory, null],
    ['workers, no management API', 2, null, memory, null],
    ['workers, management on etcd', 2, 0, etcd, null],
    ['workers, management on a memory registry', 2, 0, memory, /needs registry\.store: etcd/],
  ])('%s', (_what, workers, port, registry, expected) => {
    const problem = workersProblem({ management: { port } as never, registry: registry as never }, workers);
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });
});
