import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { blockKey, decodeKvEventBatch, KvEventDecodeError, type KvEvent } from './kv-event-decoder.js';

const DIR = new URL('../../test/fixtures/engines/vllm/kv-events/', import.meta.url);

interface KvFixture {
  hex: string;
  expected: { ts: number; dataParallelRank: number | null; events: unknown[]; skipped?: number };
}

/** The decoded events in the fixtures' JSON form (hashes as decimal strings). */
function plain(e: KvEvent): unknown {
  if (e.kind === 'cleared') return e;
  const hashes = e.hashes.map(String);
  if (e.kind === 'removed') return { kind: e.kind, hashes, medium: e.medium };
  return { ...e, hashes, parent: e.parent === null ? null : String(e.parent) };
}

describe('decodeKvEventBatch on golden payloads (test/fixtures/engines/vllm/kv-events)', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));
  it('has fixtures for every layout', () => expect(files.length).toBeGreaterThanOrEqual(5));
  it.each(files)('%s', (file) => {
    const fx = JSON.parse(readFileSync(new URL(file, DIR), 'utf8')) as KvFixture;
    const batch = decodeKvEventBatch(Buffer.from(fx.hex, 'hex'));
    expect(batch.ts).toBe(fx.expected.ts);
    expect(batch.dataParallelRank).toBe(fx.expected.dataParallelRank);
    expect(batch.events.map(plain)).toEqual(fx.expected.events);
    expect(batch.skipped).toBe(fx.expected.skipped ?? 0);
  });
});

describe('decodeKvEventBatch rejects malformed payloads with one line', () => {
  it.each([
    ['not msgpack', 'c1'],
    ['a bare int', '05'],
    ['ts not a number', '92a17890'],
    ['events not a list', '92cb3ff000000000000000c0'],
    ['event neither array nor map', '92cb3ff00000000000000091c0'],
    ['BlockStored hashes not a list', '92cb3ff00000000000000091' + '93ab426c6f636b53746f72656405c0'],
  ])('%s', (_name, hex) => {
    expect(() => decodeKvEventBatch(Buffer.from(hex, 'hex'))).toThrow(KvEventDecodeError);
    try {
      decodeKvEventBatch(Buffer.from(hex, 'hex'));
    } catch (err) {
      expect((err as Error).message).not.toContain('\n');
    }
  });
});

describe('blockKey', () => {
  it.each<[string, Parameters<typeof blockKey>[0], bigint]>([
    ['small int', 7, 7n],
    ['negative int (Python hash)', -1, 2n ** 64n - 1n],
    ['uint64 bigint', 2n ** 64n - 2n, 2n ** 64n - 2n],
    [
      '32-byte digest: low 8 bytes big-endian',
      Uint8Array.from({ length: 32 }, (_, i) => i),
      0x18191a1b1c1d1e1fn,
    ],
  ])('%s', (_name, value, key) => expect(blockKey(value)).toBe(key));
  it('refuses a short digest', () => expect(() => blockKey(new Uint8Array(4))).toThrow(/4 bytes/));
});
