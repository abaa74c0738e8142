import { describe, expect, it } from 'vitest';
import { ConfigError, validateCoordinatorConfig } from './coordinator-config.js';

const routingSyncOf = (raw: unknown) => validateCoordinatorConfig({ routingSync: raw }).routingSync;

describe('routingSync section', () => {
  it('is off when absent', () => {
    expect(validateCoordinatorConfig({}).routingSync).toBeUndefined();
  });

  it.each([
    [{}, { redis: {}, channel: 'motor:routing', flushMs: 1, maxOpsPerBatch: 256, warmStartTimeoutMs: 3000 }],
    [
      { redis: { url: 'redis://10.0.0.7:6379' }, channel: 'fleet-a', peerTimeoutMs: 9000 },
      { redis: { url: 'redis://10.0.0.7:6379' }, channel: 'fleet-a', peerTimeoutMs: 9000, heartbeatMs: 1000 },
    ],
  ])('%j → %j', (raw, expected) => {
    expect(routingSyncOf(raw)).toMatchObject(expected);
  });

  it.each([
    [{ channel: '' }, /routingSync\.channel/],
    [{ flushMs: 0 }, /routingSync\.flushMs/],
    [{ redis: { host: 'x' } }, /routingSync\.redis: unknown key\(s\) 'host'/],
  ])('refuses %j', (raw, message) => {
    expect(() => routingSyncOf(raw)).toThrow(ConfigError);
    expect(() => routingSyncOf(raw)).toThrow(message);
  });
});
