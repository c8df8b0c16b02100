/** The deepest nesting of tool arguments taken: far beyond any tool's schema, far below the stack's limit. */
export const MAX_ARGUMENT_DEPTH = 64;

/**
 * Whether a parsed JSON value nests deeper than `limit` arrays and objects. Counted without
 * recursion: a value nested 20,000 deep (a 40 KB line) overflows the stack of the recursive walks
 * after it (JSON.stringify of the dictated call), which answered -32603 "Maximum call stack size
 * exceeded" as if the server had failed.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}
