import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryRegistry } from './memory-registry.js';
import { startManagementServer, type ManagementServer } from './management-api.js';
import { LISTENING_SERVER_KEY } from '../common/logger.js';

/** A pino logger writing its lines into `lines` (one JSON text per line). */
function captured(name: string): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { log: pino({ name }, sink), lines };
}

let server: ManagementServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

describe('listening line (issue 18 item 8)', () => {
  it("the management server's line carries one `name` (the logger's) and names itself in `server`", async () => {
    const { log, lines } = captured('motor-coordinator');
    server = await startManagementServer({ registry: new MemoryRegistry(), logger: log });
    const line = lines.find((l) => l.includes('"msg":"listening"'))!;
    expect(line.match(/"name":/g)).toHaveLength(1);
    const entry = JSON.parse(line) as Record<string, unknown>;
    expect(entry).toMatchObject({
      name: 'motor-coordinator',
      url: server.url,
      [LISTENING_SERVER_KEY]: 'management',
    });
  });
});
