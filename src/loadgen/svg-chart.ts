import type { TargetResult } from './runner.js';

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];

interface Panel {
  title: string;
  groups: string[];
  value: (r: TargetResult, group: number) => number;
  format: (v: number) => string;
  /** Fixed axis maximum (percentages). */
  axisMax?: number;
}

const pcts = ['p50', 'p90', 'p99'] as const;
const rate = (v: number): string => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

const PANELS: Panel[] = [
  { title: 'TTFT (ms, lower is better)', groups: [...pcts], value: (r, g) => r.ttftMs[pcts[g]!], format: ms },
  { title: 'Inter-token latency (ms)', groups: [...pcts], value: (r, g) => r.itlMs[pcts[g]!], format: ms },
  { title: 'End-to-end latency (ms)', groups: [...pcts], value: (r, g) => r.e2eMs[pcts[g]!], format: ms },
  { title: 'Requests/s (higher is better)', groups: ['req/s'], value: (r) => r.requestsPerS, format: rate },
  { title: 'Output tokens/s', groups: ['tok/s'], value: (r) => r.outputTokensPerS, format: rate },
  {
    title: 'Prefix-cache hit rate (%)',
    groups: ['cached ÷ prompt tokens'],
    value: (r) => r.prefixCacheHitRate * 100,
    format: (v) => v.toFixed(1),
    axisMax: 100,
  },
];

export function escapeXml(s: string): string {
  return s.replace(
    /[<>&"']/g,
    (c) => `&${{ '<': 'lt', '>': 'gt', '&': 'amp', '"': 'quot', "'": 'apos' }[c]!};`,
  );
}

/** A "nice" axis maximum and tick step (1, 2, 2.5 or 5 × 10^k) covering `max` with about 4 ticks. */
export function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0) || !Number.isFinite(max)) return { top: 1, step: 0.25 };
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw)!;
  return { top: Math.ceil(max / step) * step, step };
}

function num(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
}

/**
 * A self-contained SVG comparing targets: a legend and six grouped bar panels (TTFT, ITL and
 * end-to-end p50/p90/p99; requests/s, output tokens/s, prefix-cache hit rate), one bar colour per target, value labels above the bars.
 */
export function renderSvg(results: TargetResult[], title: string, subtitle = ''): string {
  const panelW = 340;
  const panelH = 240;
  const cols = 3;
  const margin = 20;
  const headerH = subtitle ? 92 : 74;
  const width = cols * panelW + (cols + 1) * margin;
  const rows = Math.ceil(PANELS.length / cols);
  const height = headerH + rows * (panelH + margin) + margin;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${margin}" y="30" font-size="18" font-weight="bold" fill="#222">${escapeXml(title)}</text>`,
  );
  if (subtitle) out.push(`<text x="${margin}" y="50" fill="#555">${escapeXml(subtitle)}</text>`);
  // Legend
  let lx = margin;
  const ly = headerH - 18;
  results.forEach((r, i) => {
    const label = `${r.name}${r.failed ? ` (${r.failed} errors)` : ''}`;
    out.push(
      `<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`,
      `<text x="${lx + 18}" y="${ly}" fill="#222">${escapeXml(label)}</text>`,
    );
    lx += 18 + label.length * 7 + 24;
  });
  PANELS.forEach((panel, p) => {
    const px = margin + (p % cols) * (panelW + margin);
    const py = headerH + Math.floor(p / cols) * (panelH + margin);
    out.push(...renderPanel(panel, results, px, py, panelW, panelH));
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function renderPanel(
  panel: Panel,
  results: TargetResult[],
  x: number,
  y: number,
  w: number,
  h: number,
): string[] {
  const out: string[] = [];
  const left = 48;
  // room above the plot for the title and a value label over a bar that reaches the axis top
  const top = 42;
  const bottom = 26;
  const plotW = w - left - 10;
  const plotH = h - top - bottom;
  const values = results.map((r) => panel.groups.map((_, g) => panel.value(r, g)));
  const max = Math.max(0, ...values.flat().filter(Number.isFinite));
  const { top: axisTop, step } = niceScale(panel.axisMax ?? max);
  const yOf = (v: number): number => y + top + plotH - (v / axisTop) * plotH;
  out.push(
    `<g>`,
    `<rect x="${x}" y="${y}" width="${w}" height="${h}" fill="#fafafa" stroke="#e0e0e0"/>`,
    `<text x="${x + 10}" y="${y + 18}" font-size="13" font-weight="bold" fill="#333">${escapeXml(panel.title)}</text>`,
  );
  for (let t = 0; t <= axisTop + step / 2; t += step) {
    const ty = yOf(t).toFixed(1);
    out.push(
      `<line x1="${x + left}" y1="${ty}" x2="${x + left + plotW}" y2="${ty}" stroke="${t === 0 ? '#999' : '#e6e6e6'}"/>`,
      `<text x="${x + left - 6}" y="${ty}" dy="4" text-anchor="end" fill="#666" font-size="11">${num(t)}</text>`,
    );
  }
  const groupW = plotW / panel.groups.length;
  const barW = Math.min(36, (groupW * 0.8) / Math.max(1, results.length));
  panel.groups.forEach((g, gi) => {
    const gx = x + left + gi * groupW;
    const startX = gx + (groupW - barW * results.length) / 2;
    results.forEach((_, ri) => {
      const v = values[ri]![gi]!;
      if (!Number.isFinite(v)) return;
      const by = yOf(v);
      const bx = startX + ri * barW;
      out.push(
        `<rect x="${bx.toFixed(1)}" y="${by.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y + top + plotH - by).toFixed(1)}" fill="${COLORS[ri % COLORS.length]}"><title>${escapeXml(`${results[ri]!.name} ${g}: ${panel.format(v)}`)}</title></rect>`,
        `<text x="${(bx + (barW - 2) / 2).toFixed(1)}" y="${(by - 4).toFixed(1)}" text-anchor="middle" fill="#333" font-size="10">${escapeXml(panel.format(v))}</text>`,
      );
    });
    out.push(
      `<text x="${(gx + groupW / 2).toFixed(1)}" y="${y + h - 8}" text-anchor="middle" fill="#444">${escapeXml(g)}</text>`,
    );
  });
  out.push('</g>');
  return out;
}
