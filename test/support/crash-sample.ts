/**
 * Which boundaries a crash suite kills at on a slower store: all of them, or a seeded random
 * `fraction`. The seed is printed and taken from `BERTH_CRASH_SEED` when set, so a failing sample
 * is replayed exactly.
 */
export function sampleBoundaries<T>(all: T[], fraction: number, suite: string): T[] {
  if (fraction >= 1) return all;
  const seed = process.env.BERTH_CRASH_SEED ? Number(process.env.BERTH_CRASH_SEED) : Math.floor(Math.random() * 2 ** 31);
  // mulberry32: small, seedable, good enough to pick a sample.
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const n = Math.max(1, Math.ceil(all.length * fraction));
  const idx = all.map((_, i) => i);
  for (let i = idx.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [idx[i], idx[j]] = [idx[j]!, idx[i]!];
  }
  const picked = idx.slice(0, n).sort((x, y) => x - y).map((i) => all[i]!);
  console.log(`${suite}: killing at ${n} of ${all.length} boundaries, seed ${seed} (BERTH_CRASH_SEED=${seed} replays it)`);
  return picked;
}
