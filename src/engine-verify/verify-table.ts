import type { VerifyReport } from './verify-result.js';

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/**
 * `motor verify`'s plain table: target, check, verdict, fact, what was seen; then per drift the
 * expectation and the fix. `--json` has every cell whole.
 */
export function verifyTable(report: VerifyReport, seenWidth = 90): string {
  const rows = [['TARGET', 'CHECK', 'VERDICT', 'FACT', 'SEEN']];
  const drifts: string[] = [];
  for (const c of report.checks) {
    rows.push([
      c.target,
      c.check,
      c.verdict.toUpperCase(),
      c.fact === null ? '-' : String(c.fact),
      cut(c.seen, seenWidth),
    ]);
    if (c.fix !== null)
      drifts.push(
        `drift ${c.target} ${c.check} (fact ${c.fact ?? '-'}): expected ${c.expected}\n  fix: ${c.fix}`,
      );
  }
  const widths = [0, 1, 2, 3].map((col) => Math.max(...rows.map((r) => r[col]!.length)));
  const lines = rows.map((r) =>
    r.map((cell, col) => (col < 4 ? cell.padEnd(widths[col]!) : cell)).join('  '),
  );
  if (report.checks.length === 0) lines.push('(no direct-mode instances in the config)');
  const verdict = report.drift ? `drift found (${drifts.length})` : 'no drift found';
  return [...lines, '', ...drifts, ...(drifts.length ? [''] : []), verdict].join('\n');
}
