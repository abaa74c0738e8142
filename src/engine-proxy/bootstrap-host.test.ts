import { describe, expect, it } from 'vitest';
import { bootstrapHostProblem } from './bootstrap-host.js';

describe('bootstrapHostProblem: a loopback bootstrap host with remote peers is refused', () => {
  const base = {
    engine: 'sglang' as const,
    role: 'prefill' as const,
    engineUrl: 'http://127.0.0.1:30000',
    bootstrapHost: null,
    host: '127.0.0.1',
    peerAllow: ['http://127.0.0.1:*'],
  };
  it.each([
    ['loopback everywhere (tests, motor up)', {}, null],
    [
      'listening on every interface',
      { host: '0.0.0.0' },
      /loopback but the proxy listens on 0\.0\.0\.0.*--bootstrap-host/,
    ],
    [
      'a remote --peer-allow',
      { peerAllow: ['http://10.1.2.3:*'] },
      /--peer-allow names http:\/\/10\.1\.2\.3:\*/,
    ],
    [
      'localhost engine URL, remote peer',
      { engineUrl: 'http://localhost:30000', peerAllow: ['http://decode:8002'] },
      /bootstrap host localhost is loopback/,
    ],
    ['explicit --bootstrap-host', { host: '0.0.0.0', bootstrapHost: '10.0.0.5' }, null],
    ['engine URL on a routable host', { engineUrl: 'http://10.0.0.5:30000', host: '0.0.0.0' }, null],
    [
      'an explicit loopback --bootstrap-host is checked too',
      { bootstrapHost: '127.0.0.1', engineUrl: 'http://10.0.0.5:1', host: '::' },
      /bootstrap host 127\.0\.0\.1/,
    ],
    ['a decode proxy has no bootstrap server', { role: 'decode' as const, host: '0.0.0.0' }, null],
    ['a vLLM prefill neither', { engine: 'vllm' as const, host: '0.0.0.0' }, null],
  ])('%s', (_name, over, expected) => {
    const problem = bootstrapHostProblem({ ...base, ...over });
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });
});
