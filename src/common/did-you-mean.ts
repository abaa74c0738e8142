import { distance } from 'fastest-levenshtein';

/**
 * The candidate closest to `value` (case-insensitive edit distance), when it is close enough to be a
 * typo: at most one edit per four characters, between one and three. A far-off value gets no suggestion,
 * because a wrong guess misleads more than none.
 */
export function nearest(value: string, candidates: Iterable<string>): string | undefined {
  const wanted = value.toLowerCase();
  if (wanted === '') return undefined;
  const limit = Math.min(3, Math.max(1, Math.floor(wanted.length / 4)));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = distance(wanted, candidate.toLowerCase());
    if (d < bestDistance && d <= limit) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** `; did you mean 'x'?` for a near miss, else the empty string: appended to one-line errors. */
export function didYouMean(value: string, candidates: Iterable<string>): string {
  const match = nearest(value, candidates);
  return match === undefined || match === value ? '' : `; did you mean '${match}'?`;
}
