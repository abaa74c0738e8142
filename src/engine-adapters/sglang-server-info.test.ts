import { describe, expect, it } from 'vitest';
import { loadEngineFixture } from '../../test/fixtures/engines/load.js';
import { parseSglangServerInfo, resolveSglangBootstrapPort, urlPort } from './sglang-server-info.js';

const fixture = loadEngineFixture('sglang/server/server-info.json');

describe('parseSglangServerInfo', () => {
  it('reads the golden /server_info body', () => {
    expect(parseSglangServerInfo(fixture.body)).toEqual({
      disaggregationMode: 'prefill',
      bootstrapPort: 8998,
      model: 'Qwen/Qwen3-8B',
      version: '0.5.x',
      rustFrontend: false,
    });
  });

  it("reads the Rust server's allowlisted /server_info (no mode, no bootstrap port)", () => {
    expect(parseSglangServerInfo(loadEngineFixture('sglang/rust-server/server-info.json').body)).toEqual({
      disaggregationMode: null,
      bootstrapPort: null,
      model: 'Qwen/Qwen3-8B',
      version: '0.5.x',
      rustFrontend: true,
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
      { disaggregationMode: null, bootstrapPort: null, model: 'm', version: null, rustFrontend: false },
    ],
  ])('%s', (_name, input, expected) => {
    expect(parseSglangServerInfo(input)).toEqual(expected);
  });
});

describe('resolveSglangBootstrapPort', () => {
  const python = (port: number | null) => ({ bootstrapPort: port, rustFrontend: false });
  const rust = { bootstrapPort: null, rustFrontend: true };
  it.each([
    ['reported wins', python(9000), 7000, { port: null }, { port: 9000, from: 'engine' }],
    ['configured', python(null), 7000, { port: null }, { port: 7000, from: 'config' }],
    ['no answer, configured', null, 7000, { port: 30000 }, { port: 7000, from: 'config' }],
    ['default', null, null, { port: null }, { port: 8998, from: 'default' }],
    // SGLang's Rust server: the registry is on the HTTP port, whatever was configured
    ['rust frontend', rust, 8998, { port: 30000 }, { port: 30000, from: 'rust-server' }],
    ['flag, no answer', null, 7000, { port: 30000, onHttpPort: true }, { port: 30000, from: 'rust-server' }],
    [
      'flag beats a report',
      python(8998),
      null,
      { port: 30000, onHttpPort: true },
      { port: 30000, from: 'rust-server' },
    ],
    ['rust, HTTP port unknown', rust, 7000, { port: null }, { port: 7000, from: 'config' }],
  ] as const)('%s', (_name, reported, configured, http, expected) => {
    expect(resolveSglangBootstrapPort(reported, configured, http)).toEqual(expected);
  });

  it.each([
    ['http://10.0.0.1:30000', 30000],
    ['http://h', 80],
    ['https://h/x', 443],
    ['nope', null],
  ])('urlPort(%s) = %s', (url, port) => expect(urlPort(url)).toBe(port));
});
