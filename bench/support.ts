/** Small helpers every bench uses: medians over repeated runs and a plain table printer. */

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Runs `fn` `runs` times after `warmup` unmeasured runs; returns the median of what it returns. */
export function medianOf(runs: number, fn: () => number, warmup = 2): number {
  for (let i = 0; i < warmup; i++) fn();
  return median(Array.from({ length: runs }, fn));
}

export async function medianOfAsync(runs: number, fn: () => Promise<number>, warmup = 2): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const values: number[] = [];
  for (let i = 0; i < runs; i++) values.push(await fn());
  return median(values);
}

export function printTable(title: string, header: readonly string[], rows: readonly (readonly (string | number)[])[]): void {
  const cells = [header, ...rows].map((row) => row.map((cell) => (typeof cell === 'number' ? format(cell) : cell)));
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  const line = (row: readonly string[]) => `| ${row.map((cell, i) => cell.padStart(widths[i]!)).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(cells[0]!));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of cells.slice(1)) console.log(line(row));
}

function format(n: number): string {
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}
