/** One line of a unified text diff: kept (context), removed or added; `gap` stands for unchanged lines left out. */
export type DiffLine = { op: ' ' | '-' | '+'; text: string } | { op: 'gap'; lines: number };

/** Lines of context around each change. */
const CONTEXT = 3;
/** The comparison table's size limit (lines of the changed middle, multiplied): past it no diff is shown. */
const MAX_CELLS = 4_000_000;

/** Text for a diff, or why not: NUL bytes or bytes that are no UTF-8 make a file binary. */
export function asText(bytes: Buffer): string | 'binary' {
  if (bytes.subarray(0, 8000).includes(0)) return 'binary';
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return 'binary';
  }
}

const lines = (t: string) => (t === '' ? [] : t.replace(/\n$/, '').split('\n'));

/**
 * A line diff of two texts (longest common subsequence over what differs between the common
 * head and tail), with unchanged runs beyond the context folded into gaps; `too-large` when the
 * changed middle would need more than {@link MAX_CELLS} comparisons.
 */
export function lineDiff(before: string, after: string): DiffLine[] | 'too-large' {
  const a = lines(before);
  const b = lines(after);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  if ((am.length + 1) * (bm.length + 1) > MAX_CELLS) return 'too-large';
  // lcs[i][j]: the longest common subsequence of am[i..] and bm[j..].
  const w = bm.length + 1;
  const lcs = new Uint32Array((am.length + 1) * w);
  for (let i = am.length - 1; i >= 0; i--) for (let j = bm.length - 1; j >= 0; j--) lcs[i * w + j] = am[i] === bm[j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!);
  const full: Array<{ op: ' ' | '-' | '+'; text: string }> = a.slice(0, head).map((text) => ({ op: ' ' as const, text }));
  let i = 0;
  let j = 0;
  while (i < am.length || j < bm.length) {
    if (i < am.length && j < bm.length && am[i] === bm[j]) (full.push({ op: ' ', text: am[i]! }), i++, j++);
    // Removals before additions where either keeps the subsequence longest (as diff -u prints them).
    else if (i < am.length && (j === bm.length || lcs[(i + 1) * w + j]! >= lcs[i * w + j + 1]!)) full.push({ op: '-', text: am[i++]! });
    else full.push({ op: '+', text: bm[j++]! });
  }
  full.push(...a.slice(a.length - tail).map((text) => ({ op: ' ' as const, text })));
  return fold(full);
}

/** Unchanged lines farther than the context from every change become one gap. */
function fold(full: Array<{ op: ' ' | '-' | '+'; text: string }>): DiffLine[] {
  const near = new Uint8Array(full.length);
  full.forEach((l, k) => {
    if (l.op === ' ') return;
    for (let d = Math.max(0, k - CONTEXT); d <= Math.min(full.length - 1, k + CONTEXT); d++) near[d] = 1;
  });
  const out: DiffLine[] = [];
  full.forEach((l, k) => {
    if (near[k]) return void out.push(l);
    const last = out[out.length - 1];
    if (last?.op === 'gap') last.lines++;
    else out.push({ op: 'gap', lines: 1 });
  });
  return out;
}
