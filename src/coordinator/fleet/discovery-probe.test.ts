import { describe, expect, it } from 'vitest';
import { fixtureBody } from '../../../test/fixtures/engines/load.js';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { probeInstance, type JsonGetter } from './discovery-probe.js';

const MODELS = { object: 'list', data: [{ id: 'm' }] };
const INFO = {
  object: 'motor.engine_proxy_info',
  engine: 'vllm',
  role: 'prefill',
  dispatch_profile: 'handoff',
  dispatch_capabilities: ['prefill_handoff_decode'],
  accepts_roles: ['prefill', 'single'],
};

/** Answers the given paths; every other path fails as a 404 would. Records path and headers. */
function fakeGetter(bodies: Record<string, unknown>): { get: JsonGetter; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    get: async (_base, path, _signal, headers) => {
      asked.push(`${path}${headers.authorization ? ` (${headers.authorization})` : ''}`);
      if (!(path in bodies)) throw new Error(`GET ${path}: HTTP 404`);
      return bodies[path];
    },
  };
}

const instance = (extra: Record<string, unknown>) =>
  validateCoordinatorConfig({ instances: [{ url: 'http://e:1', role: 'prefill', ...extra }] }).instances[0]!;

describe('probeInstance: what discovery asks, per mode and engine', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>, string[], Record<string, unknown>]>([
    [
      'proxy: /v1/motor/info and the passed-through /v1/models, never an engine key',
      {},
      { '/v1/motor/info': INFO, '/v1/models': MODELS },
      ['/v1/models', '/v1/motor/info'],
      { kind: 'proxy', error: null, models: ['m'] },
    ],
    [
      'direct SGLang: /server_info, else /get_server_info, with the key',
      { mode: 'direct', engine: 'sglang' },
      { '/get_server_info': fixtureBody('sglang/server/server-info.json') },
      ['/get_server_info (Bearer k)', '/server_info (Bearer k)', '/v1/models (Bearer k)'],
      { kind: 'sglang', error: null, models: null },
    ],
    [
      'direct SGLang without server info: the error is kept',
      { mode: 'direct', engine: 'sglang' },
      {},
      ['/get_server_info (Bearer k)', '/server_info (Bearer k)', '/v1/models (Bearer k)'],
      { kind: 'sglang', info: null, error: 'GET /get_server_info: HTTP 404' },
    ],
    [
      'direct vLLM: only /v1/models (no server info outside dev mode)',
      { mode: 'direct' },
      { '/v1/models': MODELS },
      ['/v1/models (Bearer k)'],
      { kind: 'engine', models: ['m'] },
    ],
  ])('%s', async (_name, extra, bodies, asked, expected) => {
    const fake = fakeGetter(bodies);
    const probe = await probeInstance(instance(extra), fake.get, 1_000, 'k');
    expect(probe).toMatchObject(expected);
    expect(fake.asked.sort()).toEqual(asked);
  });

  it('a proxy body that is not Motor proxy info is an error, not a result', async () => {
    const fake = fakeGetter({ '/v1/motor/info': { status: 'ok' } });
    expect(await probeInstance(instance({}), fake.get, 1_000)).toMatchObject({
      info: null,
      error: 'GET /v1/motor/info: unexpected body',
    });
  });
});
