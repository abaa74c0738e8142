import { describe, expect, it } from 'vitest';
import { spawnMotor } from '../src/cluster/motor-child.js';

/** `motor coordinator` logs one line on shutdown (issue 18 item 8); runs dist/ (`npm run build` first). */
describe('motor coordinator shutdown', () => {
  it.each([
    ['default grace', [], 10_000],
    ['server.shutdownGraceMs', ['--set', 'server.shutdownGraceMs=250'], 250],
  ])('%s: SIGTERM → one shutdown line (signal, in flight, drain result)', async (_what, extra, graceMs) => {
    const child = await spawnMotor(['coordinator', '--port', '0', ...extra]);
    await child.stop();
    const lines = child.logs.filter((l) => l.msg === 'shutdown');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      signal: 'SIGTERM',
      in_flight: 0,
      grace_ms: graceMs,
      drained: true,
      cut: 0,
    });
  });
});
