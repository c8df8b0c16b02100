import { defineConfig } from 'vitest/config';

/** Suites that restart the Docker engine: they run alone, after every other suite. */
export default defineConfig({
  test: {
    include: ['test/engine/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
