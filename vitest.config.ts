import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/engine/**', 'node_modules/**'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Docker-backed suites share one engine on a 2-core machine; more workers only add contention.
    maxWorkers: 2,
    sequence: { sequencer: SlowFirstSequencer },
  },
});
