import { describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { parseSglangServerInfo, resolveSglangBootstrapPort } from './sglang-server-info.js';

const fixture = loadEngineFixture('sglang/server/server-info.json');

describe('parseSglangServerInfo', () => {
  it('reads the golden /server_info body', () => {
    expect(parseSglangServerInfo(fixture.body)).toEqual({
      disaggregationMode: 'prefill',
      bootstrapPort: 8998,
      model: 'Qwen/Qwen3-8B',
      version: '0.5.x',
    });
  });

  it.each([
    ['not an object', [], null],
    ['null', null, null],
    [
      'unknown mode, bad port, served name wins',
      {
        disaggregation_mode: 'null',
        disaggregation_bootstrap_port: 0,
        served_model_name: 'm',
        model_path: 'p',
      },
      { disaggregationMode: null, bootstrapPort: null, model: 'm', version: null },
    ],
  ])('%s', (_name, input, expected) => {
    expect(parseSglangServerInfo(input)).toEqual(expected);
  });
});

describe('resolveSglangBootstrapPort', () => {
  it.each([
    [9000, 7000, 9000],
    [null, 7000, 7000],
    [null, null, 8998],
  ])('reported %s, configured %s → %s', (reported, configured, expected) => {
    expect(resolveSglangBootstrapPort(reported, configured)).toBe(expected);
  });
});
