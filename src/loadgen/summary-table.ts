import type { TargetResult } from './runner.js';

interface Row {
  label: string;
  value: (r: TargetResult) => number;
  format: (v: number) => string;
  /** Show a ratio to the first target for this row (comparisons). */
  ratio?: boolean;
  /** Shown only when some target has a value (trace replay with references). */
  optional?: boolean;
}

function fixed(digits: number): (v: number) => string {
  return (v) => (Number.isFinite(v) ? v.toFixed(digits) : '–');
}
const ms = (v: number): string => (!Number.isFinite(v) ? '–' : v >= 100 ? v.toFixed(0) : v.toFixed(1));
const pct = (v: number): string => (Number.isFinite(v) ? `${(v * 100).toFixed(1)} %` : '–');

const ROWS: Row[] = [
  { label: 'requests ok', value: (r) => r.ok, format: fixed(0) },
  { label: 'errors', value: (r) => r.failed, format: fixed(0) },
  { label: 'duration s', value: (r) => r.durationS, format: fixed(1) },
  { label: 'throughput req/s', value: (r) => r.requestsPerS, format: fixed(2), ratio: true },
  { label: 'output tok/s', value: (r) => r.outputTokensPerS, format: fixed(0), ratio: true },
  { label: 'TTFT p50 ms', value: (r) => r.ttftMs.p50, format: ms, ratio: true },
  { label: 'TTFT p90 ms', value: (r) => r.ttftMs.p90, format: ms, ratio: true },
  { label: 'TTFT p99 ms', value: (r) => r.ttftMs.p99, format: ms, ratio: true },
  { label: 'ITL p50 ms', value: (r) => r.itlMs.p50, format: ms, ratio: true },
  { label: 'ITL p90 ms', value: (r) => r.itlMs.p90, format: ms, ratio: true },
  { label: 'ITL p99 ms', value: (r) => r.itlMs.p99, format: ms, ratio: true },
  { label: 'E2E p50 ms', value: (r) => r.e2eMs.p50, format: ms, ratio: true },
  { label: 'E2E p90 ms', value: (r) => r.e2eMs.p90, format: ms, ratio: true },
  { label: 'E2E p99 ms', value: (r) => r.e2eMs.p99, format: ms, ratio: true },
  { label: 'prompt tok/req', value: (r) => (r.ok ? r.promptTokens / r.ok : NaN), format: fixed(0) },
  { label: 'output tok/req', value: (r) => (r.ok ? r.outputTokens / r.ok : NaN), format: fixed(1) },
  { label: 'prefix-cache hit', value: (r) => r.prefixCacheHitRate, format: pct },
  {
    label: 'ref: infinite cache',
    value: (r) => r.referenceHitRates?.infinite ?? NaN,
    format: pct,
    optional: true,
  },
  {
    label: 'ref: pooled LRU',
    value: (r) => r.referenceHitRates?.pooledLru ?? NaN,
    format: pct,
    optional: true,
  },
  {
    label: 'ref: earliest finish',
    value: (r) => r.referenceHitRates?.earliestFinish ?? NaN,
    format: pct,
    optional: true,
  },
];

function pad(s: string, width: number, left = false): string {
  return left ? s.padEnd(width) : s.padStart(width);
}

/**
 * The summary as a plain-text table: one row per metric, one column per target, and with several
 * targets a `÷first` ratio column after each later target. Error kinds are listed below the table.
 */
export function formatSummary(results: TargetResult[]): string {
  if (results.length === 0) return 'no results\n';
  const first = results[0]!;
  const header = ['', ...results.flatMap((r, i) => (i === 0 ? [r.name] : [r.name, `÷${first.name}`]))];
  const lines: string[][] = [header];
  for (const row of ROWS) {
    if (row.optional && !results.some((r) => Number.isFinite(row.value(r)))) continue;
    const cells = [row.label];
    const base = row.value(first);
    results.forEach((r, i) => {
      const v = row.value(r);
      cells.push(row.format(v));
      if (i > 0) cells.push(row.ratio && base > 0 && Number.isFinite(v) ? `${(v / base).toFixed(2)}×` : '');
    });
    lines.push(cells);
  }
  const widths = header.map((_, c) => Math.max(...lines.map((l) => l[c]!.length)));
  const out = lines.map((l) =>
    l
      .map((cell, c) => pad(cell, widths[c]!, c === 0))
      .join('  ')
      .trimEnd(),
  );
  out.splice(1, 0, widths.map((w) => '─'.repeat(w)).join('  '));
  for (const r of results) {
    const kinds = Object.entries(r.errors);
    if (kinds.length === 0) continue;
    out.push('', `errors at ${r.name}:`);
    for (const [kind, n] of kinds)
      out.push(`  ${kind}  ×${n}  e.g. ${JSON.stringify(r.errorExamples[kind] ?? '')}`);
  }
  return out.join('\n') + '\n';
}
