/**
 * What a process has cost so far, from /proc (Linux): CPU time, minor page faults, per-thread CPU and
 * RSS. bench:overhead reads these before and after a batch of requests; a delta ÷ requests is the
 * per-request cost, measured where the work ran rather than in wall time.
 */
import { execFileSync } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

/** Fields of /proc/<pid>/stat from field 3 (state) on: the command name may hold spaces. */
async function statFields(path: string): Promise<string[]> {
  const stat = await readFile(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of a process (all threads), in clock ticks (/proc/<pid>/stat fields 14 and 15). */
export async function cpuTicks(pid: number): Promise<{ user: number; system: number }> {
  const f = await statFields(`/proc/${pid}/stat`);
  return { user: Number(f[11]), system: Number(f[12]) };
}

/** Minor page faults of a process so far (/proc/<pid>/stat field 10, minflt): first touches of fresh pages. */
export async function minorFaults(pid: number): Promise<number> {
  return Number((await statFields(`/proc/${pid}/stat`))[7]);
}

/**
 * On-CPU ms of a process's main thread (tid = pid: V8's JS thread, where the event loop runs) and
 * of its other threads together (GC helpers, libuv pool, compiler), from
 * /proc/<pid>/task/<tid>/schedstat (run time in ns: stat's utime/stime are whole clock ticks, too
 * coarse to split a few ms per request between threads).
 */
export async function threadCpuMs(pid: number): Promise<{ main: number; other: number }> {
  let main = 0;
  let other = 0;
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    // a thread may end between the listing and the read: it is then counted nowhere (its time is gone too)
    const stat = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => null);
    if (!stat) continue;
    const ms = Number(stat.split(' ')[0]) / 1e6;
    if (Number(tid) === pid) main += ms;
    else other += ms;
  }
  return { main, other };
}

let tick: number | undefined;
/** Clock ticks per second (USER_HZ). */
export function clockTick(): number {
  if (tick === undefined) {
    try {
      tick = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      tick = 100;
    }
  }
  return tick;
}

/** CPU time (user + system, ms) some processes have used so far, all threads. */
export async function cpuMs(pids: number[]): Promise<number> {
  let ticks = 0;
  for (const pid of pids) {
    const { user, system } = await cpuTicks(pid);
    ticks += user + system;
  }
  return (ticks * 1000) / clockTick();
}

/**
 * A process's CPU ms per wall ms while it gets no requests (its timers, probes and scrapes), over
 * `ms` of wall time: the long-prompt phase subtracts it for the wall time of its requests.
 */
export async function idleCpuRate(pid: number, ms = 2000): Promise<number> {
  const a = await threadCpuMs(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const b = await threadCpuMs(pid);
  return (b.main + b.other - a.main - a.other) / (performance.now() - t0);
}

export async function rssKiB(pid: number): Promise<number> {
  return Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))![1]);
}
