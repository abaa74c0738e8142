import { describe, expect, it } from 'vitest';
import { parseRegistration } from '../registry/instance-record.js';
import { selfRegistration } from './self-register.js';

const base = { coordinatorUrl: 'http://127.0.0.1:8001', models: [], heartbeatMs: 2000, bootstrapPort: null };

describe('selfRegistration', () => {
  it('registers the proxy itself: role, engine, capabilities, mode proxy, default id from the advertised URL', () => {
    const reg = selfRegistration(
      { ...base, advertiseUrl: 'http://10.0.0.9:9000/' },
      { role: 'decode', engine: 'vllm', dispatchCapabilities: ['prefill_handoff_decode'] },
    );
    expect(reg).toEqual({
      id: 'decode-10.0.0.9:9000',
      role: 'decode',
      url: 'http://10.0.0.9:9000',
      engine: 'vllm',
      mode: 'proxy',
      dispatch_capabilities: ['prefill_handoff_decode'],
      models: [],
      labels: {},
    });
    expect(() => parseRegistration(reg)).not.toThrow(); // a valid registration (id pattern, URL)
  });

  it('explicit id, models and the SGLang bootstrap port label', () => {
    const reg = selfRegistration(
      { ...base, advertiseUrl: 'http://p:9000', instanceId: 'p-1', models: ['m'], bootstrapPort: 8998 },
      { role: 'prefill', engine: 'sglang', dispatchCapabilities: ['concurrent_engine_sync'] },
    );
    expect(reg).toMatchObject({ id: 'p-1', models: ['m'], labels: { bootstrap_port: '8998' } });
  });
});
