import { readdirSync } from 'node:fs';
import { expect, it } from 'vitest';

it('exposes the protocol library as motor-pd/protocol (built output, as a consumer imports it)', async () => {
  const protocol = await import('motor-pd/protocol');
  expect(protocol.MOTOR_DISPATCH_SCHEMA_VERSION).toBe('1.0');
  expect(
    protocol.classifyVllmDispatchProfile({ kv_transfer_config: { kv_connector: 'NixlConnector' } }),
  ).toBe('handoff');
  expect(Object.keys(protocol.protocolJsonSchema('MotorDispatch'))).toContain('properties');
});

it('exposes the library as motor-pd and the simulators as motor-pd/testing (issue 18 item 1)', async () => {
  const motor = await import('motor-pd');
  const testing = await import('motor-pd/testing');
  expect(typeof motor.createCoordinator).toBe('function');
  expect(typeof motor.definePlugin).toBe('function');
  expect(typeof testing.startSimulator).toBe('function');
  // the same config errors as `motor coordinator`, path first
  await expect(motor.createCoordinator({ retry: { maxAttempts: 'x' } } as never)).rejects.toThrow(
    /retry\.maxAttempts: expected number/,
  );
  const sim = await testing.startSimulator({ role: 'union', timeScale: 0 });
  try {
    expect(sim.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  } finally {
    await sim.close();
  }
});

it('builds no test support into dist/ besides the motor/testing export', () => {
  const dist = new URL('../dist/', import.meta.url);
  const built = readdirSync(dist, { recursive: true, encoding: 'utf8' }).map((p) => p.split('\\').join('/'));
  expect(built).toContain('testing.js');
  expect(built.filter((p) => /(^|\/)testing(\/|\.)/.test(p) && !/^testing\./.test(p))).toEqual([]);
});
