// A line diff (longest common subsequence) for comparing two agent
// versions side by side. Versions are small (a definition of at most a few
// thousand lines), so the quadratic table is fine; past LIMIT lines a side
// the diff falls back to showing both whole.

export type Row =
  | { kind: "same"; left: string; right: string }
  | { kind: "changed"; left: string | null; right: string | null };

const LIMIT = 4000;

export function diffLines(a: string[], b: string[]): Row[] {
  if (a.length > LIMIT || b.length > LIMIT) {
    return Array.from({ length: Math.max(a.length, b.length) }, (_, i) => ({ kind: "changed" as const, left: a[i] ?? null, right: b[i] ?? null }));
  }
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    const row = lcs[i]!;
    const next = lcs[i + 1]!;
    for (let j = b.length - 1; j >= 0; j--) row[j] = a[i] === b[j] ? next[j + 1]! + 1 : Math.max(next[j]!, row[j + 1]!);
  }
  const rows: Row[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      rows.push({ kind: "same", left: a[i]!, right: b[j]! });
      i++;
      j++;
    } else if (j < b.length && (i >= a.length || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      rows.push({ kind: "changed", left: null, right: b[j]! });
      j++;
    } else {
      rows.push({ kind: "changed", left: a[i]!, right: null });
      i++;
    }
  }
  return rows;
}
