/**
 * bench:overhead phase 1, added latency: sequential requests (concurrency 1) to each target, targets
 * taking turns round by round; p50/p99 over all samples minus `direct`'s ("added"), and for the P/D
 * targets minus `direct-pd`'s too (what a P/D proxy adds to the two engine calls it cannot avoid).
 */

/** One request to a target, stream or not: its wall ms as the client sees it. */
export type Send = (stream: boolean) => Promise<number>;

export interface LatencyOptions {
  /** `direct` must be one of them; `direct-pd`, when present, is the floor of the P/D targets. */
  targets: Array<[string, Send]>;
  /** Targets measured over `direct-pd` as well. */
  pdTargets: ReadonlySet<string>;
  warmup: number;
  rounds: number;
  requests: number;
  maxTokens: number;
}

export interface LatencyRow {
  p50: number;
  p99: number;
  addedP50: number;
  addedP99: number;
  /** p50 − direct-pd's p50 (P/D targets only). */
  overDirectPdP50?: number;
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};
const signed = (x: number): string => `${x >= 0 ? '+' : ''}${x.toFixed(3)}`;
const ms = (x: number | undefined, width: number): string =>
  (x === undefined ? '' : x.toFixed(3)).padStart(width);

export async function runLatency(o: LatencyOptions): Promise<Record<string, Record<string, LatencyRow>>> {
  // V8 needs a few thousand requests to optimise a proxy's hot path: measure it warm
  for (let i = 0; i < 2 * o.warmup; i++) for (const [, send] of o.targets) await send(i % 2 === 0);
  const latency: Record<string, Record<string, LatencyRow>> = {};
  for (const stream of [false, true]) {
    const samples = new Map(o.targets.map(([n]) => [n, [] as number[]]));
    for (let r = 0; r < o.rounds; r++)
      for (const [n, send] of o.targets)
        for (let i = 0; i < o.requests; i++) samples.get(n)!.push(await send(stream));
    const d = samples.get('direct')!;
    const floor = samples.get('direct-pd');
    const mode = stream ? 'stream' : 'non-stream';
    const rows: Record<string, LatencyRow> = {};
    for (const [n] of o.targets) {
      const s = samples.get(n)!;
      rows[n] = {
        p50: pct(s, 50),
        p99: pct(s, 99),
        addedP50: pct(s, 50) - pct(d, 50),
        addedP99: pct(s, 99) - pct(d, 99),
        ...(floor && o.pdTargets.has(n) ? { overDirectPdP50: pct(s, 50) - pct(floor, 50) } : {}),
      };
    }
    latency[mode] = rows;
  }
  print(latency, o);
  return latency;
}

function print(latency: Record<string, Record<string, LatencyRow>>, o: LatencyOptions): void {
  console.log(
    `\nadded latency (sequential, ${o.rounds}×${o.requests} per target and mode, max_tokens ${o.maxTokens}), ms`,
  );
  console.log('mode        target        p50      p99   added p50  added p99  over direct-pd p50');
  for (const [mode, rows] of Object.entries(latency))
    for (const [n, v] of Object.entries(rows))
      console.log(
        `${mode.padEnd(11)} ${n.padEnd(12)} ${ms(v.p50, 7)} ${ms(v.p99, 8)} ${ms(v.addedP50, 10)} ${ms(v.addedP99, 10)} ${ms(v.overDirectPdP50, 19)}`,
      );
  for (const [mode, rows] of Object.entries(latency)) {
    const goals: string[] = [];
    const single = rows['motor-single'];
    const nginx = rows.nginx;
    const nodeMin = rows['node-min'];
    if (single)
      goals.push(
        `single ${signed(single.addedP50)}` +
          (nginx ? ` (goal ≤ nginx's ${signed(nginx.addedP50)} + 0.15)` : '') +
          (nodeMin ? `, node-min ${signed(nodeMin.addedP50)}` : ''),
      );
    const pd = rows['motor-pd'];
    const nodeMinPd = rows['node-min-pd'];
    if (pd)
      goals.push(
        `P/D ${signed(pd.addedP50)} (goal ≤ 0.5)` +
          (pd.overDirectPdP50 !== undefined ? `, over direct-pd ${signed(pd.overDirectPdP50)}` : '') +
          (nodeMinPd?.overDirectPdP50 !== undefined
            ? `, node-min-pd over direct-pd ${signed(nodeMinPd.overDirectPdP50)}`
            : ''),
      );
    if (goals.length > 0) console.log(`${mode} p50: ${goals.join('; ')}`);
  }
}
