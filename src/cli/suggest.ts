import { editDistance } from '../known-keys.js';

/**
 * The command a mistyped one most likely meant (`sessions lst` → `list`): the candidate at the
 * smallest edit distance, when that distance is small for the word's length (one edit up to
 * five letters, two beyond) and no other candidate is as close. Otherwise undefined: a guess
 * that could be either of two commands helps no one.
 */
export function closestCommand(word: string, candidates: readonly string[]): string | undefined {
  const allowed = word.length <= 5 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = Infinity;
  let tie = false;
  for (const candidate of candidates) {
    const d = editDistance(word.toLowerCase(), candidate);
    if (d < bestDistance) [best, bestDistance, tie] = [candidate, d, false];
    else if (d === bestDistance) tie = true;
  }
  return bestDistance <= allowed && !tie ? best : undefined;
}
