/**
 * Regression guard for the request path (docs/BENCHMARKS.md "Regression guard"): builds a named
 * baseline commit into a temporary git worktree (node_modules hard-linked from this checkout, then
 * `npx tsc -p tsconfig.build.json`), and prints the paired coordinator-CPU ratios candidate ÷ baseline
 * for the four modes of bench:ab-cpu (P/D and single, non-stream and stream) and the long-prompt
 * phase of bench:overhead (P/D, 225 KiB and 1 MiB), each the median of `--runs` runs, with the load
 * average and the command. A benchmark, not a test: it gates nothing by itself, and on the shared
 * machine only ratios measured side by side mean anything.
 *
 *   npm run bench:guard -- --baseline <commit> [--candidate <commit>] [--runs 3] [--rounds 20]
 *     [--duration 1] [--modes pd,pd-stream,single,single-stream] [--long-sizes 225,1024]
 *     [--long-requests 30] [--long-rounds 3] [--long-warmup 2000] [--no-long] [--json FILE]
 *   --candidate: a commit built the same way (default: this checkout, built by the npm script), so
 *     that a run can go on while this checkout is edited.
 *   --rounds / --duration: bench:ab-cpu's `--runs` / `--duration` of each run.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { writeFile } from 'node:fs/promises';

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    candidate: { type: 'string' },
    runs: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '20' },
    duration: { type: 'string', default: '1' },
    modes: { type: 'string', default: 'pd,pd-stream,single,single-stream' },
    'long-sizes': { type: 'string', default: '225,1024' },
    'long-requests': { type: 'string', default: '30' },
    'long-rounds': { type: 'string', default: '3' },
    'long-warmup': { type: 'string', default: '2000' },
    'no-long': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
if (!values.baseline) {
  console.error('bench:guard: --baseline <commit> is required');
  process.exit(2);
}
const ROOT = resolve('.');
const runs = Number(values.runs);
const MODES: Record<string, string[]> = {
  pd: ['--mode', 'pd'],
  'pd-stream': ['--mode', 'pd', '--stream'],
  single: ['--mode', 'single'],
  'single-stream': ['--mode', 'single', '--stream'],
};
const modes = values.modes.split(',');
for (const m of modes) if (!MODES[m]) throw new Error(`--modes: unknown mode ${m}`);

const git = (args: string[], cwd = ROOT): string =>
  execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
const loadavg = async (): Promise<string> =>
  (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = (s.length - 1) / 2;
  return (s[Math.floor(mid)]! + s[Math.ceil(mid)]!) / 2;
};

/** A child (tsx script) with its output shown as it runs; rejects on a non-zero exit. */
function runScript(script: string, args: string[]): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn('npx', ['tsx', join(ROOT, 'scripts', 'bench', script), ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('error', fail);
    child.on('exit', (code) => (code === 0 ? done() : fail(new Error(`${script} exited ${code}`))));
  });
}

const work = await mkdtemp(join(tmpdir(), 'motor-guard-'));
const worktrees: string[] = [];
/** `commit` checked out into a temporary worktree and built with this checkout's node_modules. */
async function buildCommit(commit: string, name: string): Promise<{ dir: string; sha: string }> {
  const sha = git(['rev-parse', '--short', `${commit}^{commit}`]);
  const dir = join(work, name);
  git(['worktree', 'add', '--detach', dir, sha]);
  worktrees.push(dir);
  // hard links: no copy of ~1 GB of packages, and the baseline built against the same versions
  execFileSync('cp', ['-al', join(ROOT, 'node_modules'), join(dir, 'node_modules')]);
  console.log(`bench:guard: building ${name} ${sha} in ${dir}`);
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'inherit' });
  return { dir, sha };
}
const cleanup = async (): Promise<void> => {
  for (const dir of worktrees.splice(0)) {
    try {
      git(['worktree', 'remove', '--force', dir]);
    } catch {
      // already gone: prune below drops its record
    }
  }
  git(['worktree', 'prune']);
  await rm(work, { recursive: true, force: true });
};
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void cleanup().finally(() => process.exit(130)));

interface AbResult {
  a: { medianCpuUs: number };
  b: { medianCpuUs: number };
  medianPairedRatio: number;
  load: string;
}
interface LongTarget {
  cpuMsPerRequest: number[];
  medianBytesRatio: number;
}

const command = `npm run bench:guard -- ${process.argv.slice(2).join(' ')}`;
const loadStart = await loadavg();
try {
  const base = await buildCommit(values.baseline, 'baseline');
  const cand = values.candidate
    ? await buildCommit(values.candidate, 'candidate')
    : {
        dir: ROOT,
        sha: `${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain']) ? '+' : ''}`,
      };
  if (!existsSync(join(cand.dir, 'dist', 'cli'))) throw new Error(`${cand.dir}: not built (npm run build)`);

  const rows: Array<{ mode: string; a: number; b: number; ratios: number[]; loads: string[] }> = [];
  for (const mode of modes) {
    const ratios: number[] = [];
    const a: number[] = [];
    const b: number[] = [];
    const loads: string[] = [];
    for (let r = 0; r < runs; r++) {
      const out = join(work, `ab-${mode}-${r}.json`);
      // ab-cpu's sims run from the candidate: the same engine for both coordinators
      await runScript('ab-cpu.ts', [
        '--a',
        base.dir,
        '--b',
        cand.dir,
        '--sims',
        cand.dir,
        ...MODES[mode]!,
        '--runs',
        values.rounds,
        '--duration',
        values.duration,
        '--json',
        out,
      ]);
      const res = JSON.parse(await readFile(out, 'utf8')) as AbResult;
      ratios.push(res.medianPairedRatio);
      a.push(res.a.medianCpuUs);
      b.push(res.b.medianCpuUs);
      loads.push(res.load.split(' ')[0]!);
    }
    rows.push({ mode, a: median(a), b: median(b), ratios, loads });
  }

  const longRows: Array<{ size: string; a: number; b: number; ratios: number[]; bytes: number[] }> = [];
  if (!values['no-long']) {
    const sizes = values['long-sizes'].split(',');
    const perSize = new Map(
      sizes.map((s) => [s, { a: [] as number[], b: [] as number[], r: [] as number[], x: [] as number[] }]),
    );
    for (let r = 0; r < runs; r++) {
      const out = join(work, `long-${r}.json`);
      // motor-pd is the candidate's coordinator; the sims and the floors run from this checkout
      await runScript('overhead.ts', [
        '--phases',
        'long-prompt',
        '--baseline',
        base.dir,
        '--rounds',
        values['long-rounds'],
        '--long-requests',
        values['long-requests'],
        '--long-warmup',
        values['long-warmup'],
        '--long-sizes',
        values['long-sizes'],
        '--json',
        out,
        ...(values.candidate ? ['--motor', cand.dir] : []),
      ]);
      const report = JSON.parse(await readFile(out, 'utf8')) as {
        longPrompt: Record<string, Record<string, LongTarget>>;
      };
      for (const s of sizes) {
        const row = report.longPrompt[`${s}KiB`]!;
        const a = median(row['base-pd']!.cpuMsPerRequest);
        const b = median(row['motor-pd']!.cpuMsPerRequest);
        const p = perSize.get(s)!;
        p.a.push(a);
        p.b.push(b);
        p.r.push(b / a);
        p.x.push(row['motor-pd']!.medianBytesRatio);
      }
    }
    for (const [size, p] of perSize)
      longRows.push({ size: `${size} KiB`, a: median(p.a), b: median(p.b), ratios: p.r, bytes: p.x });
  }

  const loadEnd = await loadavg();
  console.log(`\nbench:guard: baseline ${base.sha} (A) vs candidate ${cand.sha} (B); ${command}`);
  console.log(`load average ${loadStart} at the start, ${loadEnd} at the end; medians of ${runs} runs`);
  console.log('| mode | A µs/req | B µs/req | B/A (median of runs) | B/A per run | load per run |');
  console.log('| --- | ---: | ---: | ---: | --- | --- |');
  for (const r of rows)
    console.log(
      `| ${r.mode} | ${r.a.toFixed(0)} | ${r.b.toFixed(0)} | **${median(r.ratios).toFixed(3)}** | ` +
        `${r.ratios.map((x) => x.toFixed(3)).join(', ')} | ${r.loads.join(', ')} |`,
    );
  if (longRows.length) {
    console.log(
      '| long prompt | A ms/req | B ms/req | B/A (median of runs) | B/A per run | B ÷ bytes floor |',
    );
    console.log('| --- | ---: | ---: | ---: | --- | --- |');
    for (const r of longRows)
      console.log(
        `| ${r.size} | ${r.a.toFixed(2)} | ${r.b.toFixed(2)} | **${median(r.ratios).toFixed(3)}** | ` +
          `${r.ratios.map((x) => x.toFixed(3)).join(', ')} | ${median(r.bytes).toFixed(2)} |`,
      );
  }
  if (values.json)
    await writeFile(
      values.json,
      JSON.stringify(
        { command, baseline: base.sha, candidate: cand.sha, loadStart, loadEnd, rows, longRows },
        null,
        2,
      ),
    );
} finally {
  await cleanup();
}
