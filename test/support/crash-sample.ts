/**
 * Which boundaries a crash suite kills at: all of them, or a seeded random `fraction`. The seed is
 * printed and taken from `BERTH_CRASH_SEED` when set, so a failing sample is replayed exactly;
 * `BERTH_CRASH_ALL=1` takes every boundary (the suites' samples keep CI within its time).
 */
export function sampleBoundaries<T>(all: T[], fraction: number, suite: string): T[] {
  if (fraction >= 1 || crashAll()) {
    console.log(`${suite}: killing at all ${all.length} boundaries`);
    return all;
  }
  const seed = crashSeed();
  const rand = mulberry32(seed);
  const n = Math.max(1, Math.ceil(all.length * fraction));
  const picked = shuffled(all.map((_, i) => i), rand).slice(0, n).sort((x, y) => x - y).map((i) => all[i]!);
  console.log(`${suite}: killing at ${n} of ${all.length} boundaries, seed ${seed} (BERTH_CRASH_SEED=${seed} replays it)`);
  return picked;
}

/**
 * Like {@link sampleBoundaries}, but no kind of boundary is left out: every kind (`kindOf`, e.g.
 * the commit label without its occurrence) is killed at once at least, at a seeded occurrence,
 * and a seeded `fraction` of the other occurrences is added. Prints the seed and what it picked.
 */
export function sampleEveryKind(all: string[], fraction: number, kindOf: (target: string) => string, suite: string): string[] {
  const k = byKind(all, fraction, kindOf, suite);
  if (k === 'all') return all;
  const { kinds, seed, rand } = k;
  const chosen = new Set<number>();
  for (const occurrences of kinds.values()) chosen.add(occurrences[Math.floor(rand() * occurrences.length)]!);
  const rest = shuffled(all.map((_, i) => i).filter((i) => !chosen.has(i)), rand);
  for (const i of rest.slice(0, Math.ceil(rest.length * fraction))) chosen.add(i);
  const picked = [...chosen].sort((x, y) => x - y).map((i) => all[i]!);
  console.log(
    `${suite}: killing at ${picked.length} of ${all.length} boundaries (every one of the ${kinds.size} kinds, plus ${Math.round(fraction * 100)}% of the other occurrences), seed ${seed} (BERTH_CRASH_SEED=${seed} replays it)`,
  );
  return picked;
}

/**
 * A seeded `fraction` of the kinds of boundary (`kindOf`), each killed once at a seeded occurrence:
 * every run covers a different share of the kinds, and the seed (printed, `BERTH_CRASH_SEED`)
 * replays it. `BERTH_CRASH_ALL=1` takes every boundary.
 */
export function sampleKinds(all: string[], fraction: number, kindOf: (target: string) => string, suite: string): string[] {
  const k = byKind(all, fraction, kindOf, suite);
  if (k === 'all') return all;
  const { kinds, seed, rand } = k;
  const picked = shuffled([...kinds.values()], rand)
    .slice(0, Math.max(1, Math.ceil(kinds.size * fraction)))
    .map((occurrences) => occurrences[Math.floor(rand() * occurrences.length)]!)
    .sort((x, y) => x - y)
    .map((i) => all[i]!);
  console.log(`${suite}: killing at ${picked.length} of the ${kinds.size} kinds of boundary (one occurrence each, ${all.length} boundaries in all), seed ${seed} (BERTH_CRASH_SEED=${seed} replays it)`);
  return picked;
}

/** The boundaries' indexes by kind and a seeded generator, or `all` (said so) when every one is killed. */
function byKind(all: string[], fraction: number, kindOf: (target: string) => string, suite: string) {
  const kinds = new Map<string, number[]>();
  all.forEach((t, i) => kinds.set(kindOf(t), [...(kinds.get(kindOf(t)) ?? []), i]));
  if (fraction >= 1 || crashAll()) {
    console.log(`${suite}: killing at all ${all.length} boundaries (${kinds.size} kinds)`);
    return 'all' as const;
  }
  const seed = crashSeed();
  return { kinds, seed, rand: mulberry32(seed) };
}

function crashAll(): boolean {
  return process.env.BERTH_CRASH_ALL === '1';
}

function crashSeed(): number {
  return process.env.BERTH_CRASH_SEED ? Number(process.env.BERTH_CRASH_SEED) : Math.floor(Math.random() * 2 ** 31);
}

/** mulberry32: small, seedable, good enough to pick a sample. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled<T>(items: T[], rand: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
