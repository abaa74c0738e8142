import { describe, expect, it } from 'vitest';
import { didYouMean, nearest } from './did-you-mean.js';

const CONNECTORS = ['NixlConnector', 'NixlPullConnector', 'MooncakeConnectorV1', 'MultiConnector'];

describe('nearest', () => {
  it.each([
    ['NixlConnecter', CONNECTORS, 'NixlConnector'],
    ['nixlconnector', CONNECTORS, 'NixlConnector'],
    ['MooncakeConnector', CONNECTORS, 'MooncakeConnectorV1'],
    ['LMCacheConnectorV1', CONNECTORS, undefined],
    ['instance', ['instances', 'server', 'scheduling'], 'instances'],
    ['rr', ['kv', 'round_robin'], undefined],
    ['', ['a'], undefined],
  ] as const)('%s → %s', (value, candidates, expected) => {
    expect(nearest(value, candidates)).toBe(expected);
  });
});

describe('didYouMean', () => {
  it.each([
    ['NixlConnecter', "; did you mean 'NixlConnector'?"],
    ['NixlConnector', ''],
    ['SharedStorageConnector', ''],
  ])('%s', (value, expected) => {
    expect(didYouMean(value, CONNECTORS)).toBe(expected);
  });
});
