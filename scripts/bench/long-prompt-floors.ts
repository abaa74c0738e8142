/**
 * What a long prompt costs any JSON proxy, measured in the bench process for bench:overhead's
 * long-prompt phase: the body it sends, one parse + stringify of it, the same from bytes to bytes,
 * and what one fresh page costs on this machine (so minor faults can be priced).
 */
import { readFileSync } from 'node:fs';

/**
 * A chat body of about `bytes` bytes shaped like agentic traffic: a system prompt, then user and
 * assistant turns of a few KiB of word text with newlines, quotes and code (escapes included), the
 * last turn the user's. Deterministic, so every run sends the same bytes.
 */
export function longChatBody(bytes: number, model: string, maxTokens: number): string {
  const words = [
    'the',
    'coordinator',
    'routes',
    'prefill',
    'decode',
    'function',
    'return',
    'value',
    '"quoted"',
    'cache',
  ];
  let seed = 19;
  const next = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
  const turn = (chars: number): string => {
    let out = '';
    while (out.length < chars) {
      const w = words[next() % words.length]!;
      out += next() % 17 === 0 ? `${w}\n\tif (x) { y(); }\n` : `${w} `;
    }
    return out;
  };
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: turn(2000) }];
  const head = { model, max_tokens: maxTokens, stream: false };
  let size = JSON.stringify({ ...head, messages }).length;
  while (size < bytes) {
    const m = {
      role: messages.length % 2 === 1 ? 'user' : 'assistant',
      content: turn(Math.min(6000, bytes - size)),
    };
    messages.push(m);
    size += JSON.stringify(m).length + 1;
  }
  if (messages[messages.length - 1]!.role !== 'user') messages.push({ role: 'user', content: 'Go on.' });
  return JSON.stringify({ ...head, messages });
}

/** This process's minor faults so far (/proc/self/stat field 10). */
function ownMinorFaults(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7]);
}

/** CPU ms (user + system, this process) and minor faults per call of `f`, over 30 calls after 10 warm-up calls. */
function cpuPerCall(f: () => unknown): { ms: number; minflt: number } {
  for (let i = 0; i < 10; i++) f();
  const faults = ownMinorFaults();
  const before = process.cpuUsage();
  for (let i = 0; i < 30; i++) f();
  const used = process.cpuUsage(before);
  return { ms: (used.user + used.system) / 1000 / 30, minflt: (ownMinorFaults() - faults) / 30 };
}

/**
 * The floors of one body, in CPU time like the coordinator's (a loaded machine's preemption is not
 * counted): `parseStringify` — one `JSON.parse` + `JSON.stringify` of the string (the goal
 * is ≤ 1.5× this); `bytes` — what a proxy does from socket to socket: Buffer → `toString('utf8')` →
 * `JSON.parse` → `JSON.stringify` → `Buffer.from`, with its minor faults per call.
 */
export function jsonFloors(text: string): { parseStringifyMs: number; bytesMs: number; bytesMinflt: number } {
  const raw = Buffer.from(text);
  const bytes = cpuPerCall(() => Buffer.from(JSON.stringify(JSON.parse(raw.toString('utf8')))));
  return {
    parseStringifyMs: cpuPerCall(() => JSON.stringify(JSON.parse(text))).ms,
    bytesMs: bytes.ms,
    bytesMinflt: bytes.minflt,
  };
}

/**
 * CPU µs of one minor fault here: the first touch of a fresh 32 MiB buffer (mmap'd by malloc, so
 * every page faults) minus a second touch of the same pages, ÷ the faults counted; median of 5.
 */
export function freshPageUs(): number {
  const us: number[] = [];
  for (let i = 0; i < 5; i++) {
    const f0 = ownMinorFaults();
    const c0 = process.cpuUsage();
    const b = Buffer.allocUnsafeSlow(32 * 2 ** 20);
    b.fill(1);
    const first = process.cpuUsage(c0);
    const faults = ownMinorFaults() - f0;
    const c1 = process.cpuUsage();
    b.fill(2);
    const second = process.cpuUsage(c1);
    us.push((first.user + first.system - second.user - second.system) / Math.max(1, faults));
  }
  return us.sort((a, b) => a - b)[2]!;
}
