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

/** Levenshtein distance, with a swap of two neighbours counted as one edit (`lsit` → `list`). */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
