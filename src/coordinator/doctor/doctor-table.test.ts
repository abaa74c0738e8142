import { describe, expect, it } from 'vitest';
import { doctorTable } from './doctor-table.js';

describe('doctorTable', () => {
  it('one row per check, padded, then the fixes and a verdict line', () => {
    const text = doctorTable({
      at: '2026-12-03T19:00:00.000Z',
      drift: true,
      instances: [
        {
          instance: 'e0',
          engine: 'vllm',
          group: 'qwen3',
          checks: [
            {
              check: 'block_size',
              verdict: 'drift',
              detail: 'Motor hashes 32-token blocks, the engine 16',
              fix: 'set blockSize to 16',
            },
            { check: 'event_stream', verdict: 'ok', detail: 'last batch 0 s ago', fix: null },
          ],
        },
      ],
    });
    expect(text.split('\n')).toEqual([
      'INSTANCE  CHECK         VERDICT  DETAIL',
      'e0        block_size    DRIFT    Motor hashes 32-token blocks, the engine 16',
      'e0        event_stream  OK       last batch 0 s ago',
      '',
      'fix e0 block_size: set blockSize to 16',
      '',
      'drift found (1)',
    ]);
  });

  it('counts the skipped checks, which are not drift', () => {
    const text = doctorTable({
      at: '',
      drift: false,
      instances: [
        {
          instance: 'p0',
          engine: 'vllm',
          group: null,
          checks: [
            { check: 'event_stream', verdict: 'skipped', detail: 'no kvEvents.endpoint', fix: null },
            { check: 'block_size', verdict: 'skipped', detail: 'no kvHash group', fix: null },
          ],
        },
      ],
    });
    expect(text).toMatch(/p0 +event_stream +SKIPPED +no kvEvents\.endpoint/);
    expect(text.split('\n').at(-1)).toBe('no drift found; 2 skipped (they do not apply: see DETAIL)');
  });

  it('says when there is nothing to check', () => {
    expect(doctorTable({ at: '', drift: false, instances: [] })).toContain('(no instances)');
  });
});
