/**
 * Selection cost of `Scheduler.selectPair`: µs per decision for fleets of 8, 64 and 512 instances
 * (half prefill, half decode, two plans mixed), per profile configuration.
 *
 *   npx tsx scripts/bench/scheduling-select.ts
 */
import { Scheduler, type SchedulableInstance, type SchedulingRequest } from '../../src/scheduling/index.js';

const configs: Record<string, object> = {
  'round-robin': {
    prefill: { scorers: [], picker: { type: 'round-robin' } },
    decode: { scorers: [], picker: { type: 'round-robin' } },
  },
  'least-load (p2c)': {
    prefill: { scorers: [{ type: 'least-load' }], picker: { type: 'power-of-two' } },
    decode: { scorers: [{ type: 'least-load' }], picker: { type: 'power-of-two' } },
  },
  'default (prefix-affinity / least-load)': {},
  'prefix + least-load + engine-metrics + session': {
    prefill: {
      filters: [{ type: 'kv-pressure' }],
      scorers: [
        { type: 'prefix-affinity' },
        { type: 'least-load', weight: 0.5 },
        { type: 'engine-metrics', weight: 0.5 },
        { type: 'session-affinity', weight: 0.2 },
      ],
    },
    decode: { scorers: [{ type: 'least-load' }, { type: 'engine-metrics', weight: 0.5 }] },
  },
};

function fleet(n: number): SchedulableInstance[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `${i % 2 ? 'd' : 'p'}${i}`,
    role: i % 2 ? 'decode' : 'prefill',
    url: `http://10.0.0.${i}:8000`,
    dispatch_capabilities:
      i % 4 < 2 ? ['prefill_handoff_decode'] : ['concurrent_engine_sync', 'prefill_handoff_decode'],
  }));
}

// 200 conversations sharing 4 system prompts; ~2k tokens of rendered text each.
const systems = Array.from({ length: 4 }, (_, s) => `System prompt ${s}: `.padEnd(4000, `rule ${s}. `));
const requests: SchedulingRequest[] = Array.from({ length: 200 }, (_, i) => {
  const text = `${systems[i % 4]} user ${i}: ` + 'tell me more. '.repeat(300);
  return { model: 'm', promptText: text, promptTokens: Math.ceil(text.length / 4), sessionKey: `s${i}` };
});

console.log(`prompt ≈ ${requests[0]!.promptTokens} tokens of text; CPU µs per selectPair (median of 5 runs)`);
console.log(['config', ...[8, 64, 512].map((n) => `${n} inst`)].join(' | '));
for (const [name, config] of Object.entries(configs)) {
  const row = [name];
  for (const n of [8, 64, 512]) {
    const scheduler = new Scheduler({ ...config, seed: 1 });
    const instances = fleet(n);
    const now = Date.now();
    for (const inst of instances)
      scheduler.engineMetrics.update(inst.id, {
        num_requests_running: 3,
        num_requests_waiting: inst.id.length % 3,
        kv_cache_usage_perc: 0.4,
        scraped_at_ms: now,
      });
    // Some in-flight load so the scorers have something to compare.
    for (let i = 0; i < n; i += 3) scheduler.loadTracker.begin(instances[i]!.id, { promptTokens: 500 });
    const rounds = Math.max(2000, Math.floor(400_000 / n));
    const runs: number[] = [];
    for (let run = 0; run < 6; run++) {
      // CPU time: other processes on a busy machine do not inflate it.
      const start = process.cpuUsage();
      for (let r = 0; r < rounds; r++) scheduler.selectPair(requests[r % requests.length]!, instances);
      const used = process.cpuUsage(start);
      const us = (used.user + used.system) / rounds;
      if (run > 0) runs.push(us); // first run warms up
    }
    runs.sort((a, b) => a - b);
    row.push(runs[2]!.toFixed(1));
  }
  console.log(row.join(' | '));
}
