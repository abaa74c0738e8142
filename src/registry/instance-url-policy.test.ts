import { describe, expect, it } from 'vitest';
import { instanceUrlRefusal, type InstanceUrlPolicy } from './instance-url-policy.js';

const policy = (allow: Partial<InstanceUrlPolicy> = {}): InstanceUrlPolicy => ({
  allowLinkLocal: false,
  allowSelf: false,
  ownPorts: () => [8000, 8001],
  ...allow,
});

describe('instanceUrlRefusal (issue 15 finding 10)', () => {
  it.each([
    ['http://10.0.0.9:9000', null],
    ['http://decode.example:8000', null], // a name is not resolved: the hop header catches a loop
    ['http://127.0.0.1:9000', null], // a local engine on another port
    ['http://169.254.169.254/latest/meta-data', /link-local or cloud-metadata/],
    ['http://[fe80::1]:8000', /link-local/],
    ['http://metadata.google.internal', /cloud-metadata/],
    ['http://127.0.0.1:8000', /own listener \(127\.0\.0\.1:8000\)/],
    ['http://localhost:8001/v1', /own listener/],
    ['http://[::1]:8000', /own listener/],
    ['http://0.0.0.0:8000', /own listener/],
    ['http://127.0.0.1', null], // port 80 is not ours
  ])('%s', (url, refusal) => {
    const got = instanceUrlRefusal(url, policy());
    if (refusal === null) expect(got).toBeNull();
    else expect(got).toMatch(refusal);
  });

  it('each allowance opens only its own rule', () => {
    expect(instanceUrlRefusal('http://169.254.169.254', policy({ allowLinkLocal: true }))).toBeNull();
    expect(instanceUrlRefusal('http://127.0.0.1:8000', policy({ allowLinkLocal: true }))).toMatch(/own/);
    expect(instanceUrlRefusal('http://127.0.0.1:8000', policy({ allowSelf: true }))).toBeNull();
    expect(instanceUrlRefusal('http://169.254.169.254', policy({ allowSelf: true }))).toMatch(/link-local/);
  });
});
