import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration tests start real processes on loopback; two cores, so keep the fan-out small.
    maxWorkers: 2,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
