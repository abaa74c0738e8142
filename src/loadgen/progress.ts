import type { Progress } from './runner.js';

/** Fraction done (0–1) of a phase: by requests, by duration, or the larger of the two. */
export function progressFraction(p: Progress): number {
  let f = 0;
  if (p.stop.requests) f = Math.max(f, p.done / p.stop.requests);
  if (p.stop.durationMs) f = Math.max(f, p.elapsedMs / p.stop.durationMs);
  return Math.min(1, f);
}

export function progressText(p: Progress): string {
  const rate = p.elapsedMs > 0 ? (p.done / p.elapsedMs) * 1000 : 0;
  const total = p.stop.requests ? `/${p.stop.requests}` : '';
  return (
    `${p.target} ${p.phase === 'warmup' ? 'warm-up' : 'measure'} ${p.done}${total} done, ` +
    `${p.inFlight} in flight, ${p.errors} errors, ${rate.toFixed(1)} req/s, ${(p.elapsedMs / 1000).toFixed(1)} s`
  );
}

/** A one-line bar redrawn in place (TTY). */
export function progressBar(p: Progress, width = 24): string {
  const f = progressFraction(p);
  const full = Math.round(f * width);
  return `[${'█'.repeat(full)}${'░'.repeat(width - full)}] ${(f * 100).toFixed(0).padStart(3)}% ${progressText(p)}`;
}

/**
 * Reports progress on stderr while `poll()` returns a value: a bar redrawn every 100 ms on a TTY,
 * otherwise a plain line every `intervalMs`. `stop()` clears the bar.
 */
export function startProgress(
  poll: () => Progress,
  stream: NodeJS.WriteStream = process.stderr,
  intervalMs = 5_000,
): { stop(): void } {
  const tty = stream.isTTY === true;
  const timer = setInterval(
    () => {
      const p = poll();
      if (tty) stream.write(`\r\x1b[2K${progressBar(p).slice(0, Math.max(20, (stream.columns || 120) - 1))}`);
      else stream.write(`[motor bench] ${progressText(p)}\n`);
    },
    tty ? 100 : intervalMs,
  );
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      if (tty) stream.write('\r\x1b[2K');
    },
  };
}
