/** Levels of the path {@link deeperThan} names before it says `…`. */
const NAMED_LEVELS = 6;

/**
 * Where a parsed JSON value first nests deeper than `limit` arrays and objects (`$.entries[0].body.x`),
 * or undefined. Walked without recursion: the value comes from outside (a record file, a client's
 * request) and the recursive walks after it (canonical JSON, JSON.stringify with a replacer, zod)
 * overflow the stack on a value a few thousand levels deep, an internal error naming nothing.
 */
export function deeperThan(value: unknown, limit: number): string | undefined {
  const stack: Array<[unknown, number, string]> = [[value, 0, '$']];
  while (stack.length > 0) {
    const [v, depth, path] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth + 1 > limit) return path;
    // The path names where the nesting starts; past a few levels it is all the same shape.
    const step = (seg: string) => (depth < NAMED_LEVELS ? `${path}${seg}` : depth === NAMED_LEVELS ? `${path}…` : path);
    if (Array.isArray(v)) v.forEach((child, i) => stack.push([child, depth + 1, step(`[${i}]`)]));
    else for (const [k, child] of Object.entries(v)) stack.push([child, depth + 1, step(/^[A-Za-z_$][\w$]*$/.test(k) ? `.${k}` : `[${JSON.stringify(k)}]`)]);
  }
  return undefined;
}
