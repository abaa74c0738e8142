import { describe, expect, it } from 'vitest';
import { multiTurnTrace, traceJsonl } from '../scripts/bench/precise-trace.js';
import { parseMooncakeTrace } from '../src/loadgen/mooncake-trace.js';

/** The multi-turn trace bench:precise replays (scripts/bench/precise-trace.ts). */
describe('bench:precise multi-turn trace', () => {
  const opts = { sessions: 3, turns: 4, gapMs: 100, seed: 7, outputLength: 16 };

  it('is valid Mooncake JSONL, deterministic, each turn extending its session’s previous prompt', () => {
    const records = multiTurnTrace(opts);
    expect(parseMooncakeTrace(traceJsonl(records))).toEqual(records);
    expect(multiTurnTrace(opts)).toEqual(records);
    expect(records.map((r) => r.timestampMs)).toEqual(records.map((_, i) => i * 100));
    for (let i = opts.sessions; i < records.length; i++) {
      const prev = records[i - opts.sessions]!.hashIds;
      const next = records[i]!.hashIds;
      expect(next.slice(0, prev.length)).toEqual(prev);
      expect(next.length - prev.length).toBeGreaterThanOrEqual(1);
      expect(next.length - prev.length).toBeLessThanOrEqual(2);
    }
    // only the system block (id 0) is shared across sessions
    const firstTurn = records.slice(0, opts.sessions).map((r) => r.hashIds);
    expect(firstTurn.every((ids) => ids[0] === 0)).toBe(true);
    expect(new Set(firstTurn.map((ids) => ids[1])).size).toBe(opts.sessions);
  });
});
