/** Shared by the bench suites (files starting with `_` are not suites). */

/** The median; the mean of the middle two for an even count. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Milliseconds `f` took, and its value. */
export async function timed<T>(f: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const v = await f();
  return [performance.now() - t0, v];
}
