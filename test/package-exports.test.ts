import { expect, it } from 'vitest';

it('exposes the protocol library as motor/protocol (built output, as a consumer imports it)', async () => {
  const protocol = await import('motor/protocol');
  expect(protocol.MOTOR_DISPATCH_SCHEMA_VERSION).toBe('1.0');
  expect(
    protocol.classifyVllmDispatchProfile({ kv_transfer_config: { kv_connector: 'NixlConnector' } }),
  ).toBe('handoff');
  expect(Object.keys(protocol.protocolJsonSchema('MotorDispatch'))).toContain('properties');
});
