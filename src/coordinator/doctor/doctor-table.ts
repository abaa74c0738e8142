import type { DoctorReport } from './doctor.js';

/** Cuts a cell to `max` characters (the table stays readable; `--json` has the whole text). */
const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/**
 * `motor doctor`'s plain table: one row per instance and check (instance, check, verdict, detail),
 * then one `fix:` line per drift. Columns are padded to their widest cell; no colours.
 */
export function doctorTable(report: DoctorReport, detailWidth = 100): string {
  const rows = [['INSTANCE', 'CHECK', 'VERDICT', 'DETAIL']];
  const fixes: string[] = [];
  for (const inst of report.instances)
    for (const c of inst.checks) {
      rows.push([inst.instance, c.check, c.verdict.toUpperCase(), cut(c.detail, detailWidth)]);
      if (c.fix !== null) fixes.push(`fix ${inst.instance} ${c.check}: ${c.fix}`);
    }
  const widths = [0, 1, 2].map((col) => Math.max(...rows.map((r) => r[col]!.length)));
  const lines = rows.map((r) =>
    r.map((cell, col) => (col < 3 ? cell.padEnd(widths[col]!) : cell)).join('  '),
  );
  if (report.instances.length === 0) lines.push('(no instances)');
  const skipped = report.instances.reduce(
    (n, inst) => n + inst.checks.filter((c) => c.verdict === 'skipped').length,
    0,
  );
  const verdict =
    (report.drift ? `drift found (${fixes.length})` : 'no drift found') +
    (skipped > 0 ? `; ${skipped} skipped (they do not apply: see DETAIL)` : '');
  return [...lines, '', ...fixes, ...(fixes.length ? [''] : []), verdict].join('\n');
}
