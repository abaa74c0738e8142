import { describe, expect, it } from 'vitest';
import { validateCoordinatorConfig } from '../../config/coordinator-config.js';
import { doctorHint } from './doctor-hint.js';

describe('doctorHint (GET /v1/doctor on the client port)', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'a fixed management port',
      { host: '10.0.0.5', port: 8001 },
      /motor doctor --coordinator http:\/\/10\.0\.0\.5:8001$/,
    ],
    ['any free port', { port: 0 }, /management\.port 0: the port the coordinator logged/],
    ['no management API', {}, /which is off: set management\.port/],
  ])('%s', (_name, management, want) => {
    const config = validateCoordinatorConfig({ management });
    const hint = doctorHint(config.management);
    expect(hint).toMatch(
      /^this is the client port; the doctor report is GET \/v1\/doctor on the management API/,
    );
    expect(hint).toMatch(want);
  });
});
