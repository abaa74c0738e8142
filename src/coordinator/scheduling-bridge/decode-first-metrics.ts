import { Counter, type Registry } from 'prom-client';
import type { DecodeFirstOutcome, PredictionSource } from './decode-first.js';

/**
 * `motor_decode_first_total{outcome,source}` on the coordinator's registry: one count per P/D selection
 * decode-first looked at (`decodeFirst.enabled`). Fixed label values only.
 */
export function decodeFirstCounter(
  registry: Registry,
): (outcome: DecodeFirstOutcome, source: PredictionSource) => void {
  const counter = new Counter({
    name: 'motor_decode_first_total',
    help:
      'P/D selections checked by decode-first, by outcome (cached, short: sent as one leg to the decode ' +
      'instance; prefill: thresholds missed; unsupported: the decode engine cannot compute a prompt) and by ' +
      "the source of the decode instance's cached-token prediction (precise, approximate, none)",
    labelNames: ['outcome', 'source'],
    registers: [registry],
  });
  return (outcome, source) => counter.inc({ outcome, source });
}
