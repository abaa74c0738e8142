export interface BackoffConfig {
  baseDelayMs: number;
  maxDelayMs: number;
  /** Fraction of the delay that is randomised: 0 = fixed, 1 = full jitter. */
  jitter: number;
}

/**
 * Delay before attempt `nextAttempt` (2, 3, …): exponential `base × 2^(n−2)`, capped, with the
 * jittered part drawn from `random` (0 ≤ r < 1) so concurrent retries spread out.
 */
export function backoffDelayMs(
  nextAttempt: number,
  cfg: BackoffConfig,
  random: () => number = Math.random,
): number {
  if (nextAttempt <= 1) return 0;
  const exp = Math.min(cfg.maxDelayMs, cfg.baseDelayMs * 2 ** (nextAttempt - 2));
  const fixed = exp * (1 - cfg.jitter);
  return Math.round(fixed + exp * cfg.jitter * random());
}
