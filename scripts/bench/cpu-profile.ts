/**
 * Where a coordinator's CPU goes under load: `motor sim` processes (`--time-scale 0`) and one
 * coordinator of a built checkout under `node --cpu-prof`, bench:ab-cpu's single or P/D config, wrk
 * for `--warmup` then `--duration` s; the profile (written when the coordinator stops) summarised
 * as self time per function, and per file, as a share of the non-idle samples. Two builds profiled
 * one after the other on the same load say where a difference in bench:ab-cpu comes from.
 *
 *   npx tsx scripts/bench/cpu-profile.ts [--bin DIR] [--mode pd|single] [--stream] [--duration 10]
 *     [--warmup 5] [--connections 64] [--top 40] [--out DIR] [--config JSON]
 *   --bin: the built checkout whose coordinator is profiled (default: this one); the sims run from this one.
 *   --out: where the .cpuprofile stays (default: a temp dir, removed).
 *   --config: JSON merged over the coordinator config (price a feature switched on or off).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { spawnMotor } from '../../src/cluster/motor-child.js';
import { mergeDeep } from '../../src/config/merge-deep.js';
import { benchInstances, benchSimArgs, pin, profiledCoordinator, type Cleanups } from './overhead-servers.js';

const { values } = parseArgs({
  options: {
    bin: { type: 'string', default: '.' },
    mode: { type: 'string', default: 'pd' },
    stream: { type: 'boolean', default: false },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '5' },
    connections: { type: 'string', default: '64' },
    top: { type: 'string', default: '40' },
    out: { type: 'string' },
    config: { type: 'string', default: '{}' },
  },
});
const MODEL = 'motor-sim-7b';
const mode = values.mode;
if (mode !== 'single' && mode !== 'pd') throw new Error(`--mode single|pd, not ${mode}`);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

const dir = await mkdtemp(join(tmpdir(), 'motor-cpu-profile-'));
const profileDir = values.out ? resolve(values.out) : join(dir, 'profile');
const cleanups: Cleanups = [];
await rm(profileDir, { recursive: true, force: true }); // only this run's profile in it
try {
  const sim = async (role: string) => {
    const c = await spawnMotor(benchSimArgs(role, ['--max-num-seqs', '20000']), {
      timeoutMs: 60_000,
      followLogs: false,
    });
    cleanups.push(() => c.stop());
    return c;
  };
  const sims = await Promise.all(mode === 'single' ? [sim('union')] : [sim('prefill'), sim('decode')]);
  const instances = benchInstances(mode, sims, MODEL);
  const config = mergeDeep(
    {
      server: { port: 0 },
      instances,
      upstream: { connectionsPerInstance: 2048 },
      scheduling: { admission: { maxConcurrent: 4096 } },
    },
    JSON.parse(values.config) as Record<string, unknown>,
  );
  const file = join(dir, 'coordinator.yaml');
  await writeFile(file, stringify(config));
  const coord = await profiledCoordinator(
    file,
    profileDir,
    cleanups,
    join(resolve(values.bin), 'bin', 'motor.js'),
  );
  for (const pid of [...sims.map((s) => s.child.pid!), coord.pid]) pin(pid, '0');
  const script = join(dir, 'post.lua');
  await writeFile(
    script,
    `wrk.method = "POST"\nwrk.headers["content-type"] = "application/json"\nwrk.body = [[${JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'How much latency does a coordinator add per request?' }],
      max_tokens: 16,
      stream: values.stream,
    })}]]\n`,
  );
  const wrk = (s: string): string =>
    execFileSync(
      'taskset',
      [
        '-c',
        '1',
        'wrk',
        '-t1',
        `-c${values.connections}`,
        `-d${s}s`,
        '-s',
        script,
        `${coord.url}/v1/chat/completions`,
      ],
      { encoding: 'utf8' },
    );
  wrk(values.warmup);
  const out = wrk(values.duration);
  console.log(
    out
      .split('\n')
      .filter((l) => /Requests\/sec|Non-2xx|Socket errors/.test(l))
      .join('\n'),
  );
  // stop the coordinator (the last cleanup registered) so that it writes its profile
  await cleanups.pop()!();
  const [name] = (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile'));
  if (!name) throw new Error(`no profile in ${profileDir}`);
  const profile = JSON.parse(await readFile(join(profileDir, name), 'utf8')) as { nodes: ProfileNode[] };
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  let busy = 0;
  for (const n of profile.nodes) {
    const hits = n.hitCount ?? 0;
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === '(idle)' || functionName === '(program)' || hits === 0) continue;
    busy += hits;
    const file = url.replace(/^.*\/(dist|node_modules)\//, '$1/').replace(/^node:/, 'node:') || '(native)';
    const fn = `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + hits);
    byFile.set(file, (byFile.get(file) ?? 0) + hits);
  }
  const top = Number(values.top);
  const show = (title: string, m: Map<string, number>): void => {
    console.log(`\n${title} (self time, % of ${busy} non-idle samples)`);
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`${((100 * v) / busy).toFixed(1).padStart(5)} %  ${k}`);
  };
  show('by function', byFn);
  show('by file', byFile);
  if (values.out) console.log(`\nprofile: ${join(profileDir, name)}`);
} finally {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}
