import { describe, expect, it } from 'vitest';
import { bootstrapRoomFor, roomForSpan } from './bootstrap-room.js';

const MAX = (1n << 63n) - 1n;

describe('bootstrapRoomFor', () => {
  it('is deterministic per pair and attempt, 63 bits; span 1 is the plain hash', () => {
    expect(bootstrapRoomFor('p', 1)).toBe(bootstrapRoomFor('p', 1));
    expect(bootstrapRoomFor('p', 1)).not.toBe(bootstrapRoomFor('p', 2));
    expect(bootstrapRoomFor('p', 1) <= MAX).toBe(true);
    expect(bootstrapRoomFor('p', 1, 1)).toBe(bootstrapRoomFor('p', 1));
  });

  // SGLang gives prompt i of a batch `room + i`; its Rust bootstrap registry keys rooms as i64.
  it.each<[bigint, number, bigint]>([
    [MAX, 1, MAX],
    [MAX, 3, MAX - 2n],
    [MAX - 1n, 3, MAX - 2n],
    [MAX - 2n, 3, MAX - 2n],
    [5n, 1000, 5n],
    [0n, 0, 0n],
  ])('roomForSpan(%s, %s) = %s', (room, span, want) => {
    expect(roomForSpan(room, span)).toBe(want);
    expect(want + BigInt(Math.max(1, span) - 1) <= MAX).toBe(true);
  });
});
