import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/engine/**', 'node_modules/**'],
    pool: 'forks',
    testTimeout: 60_000,
    // Hooks remove each test's containers, networks and images and check its store (leaks,
    // invariants): on this 2-core machine under a full suite's load that passed 60 s (serve-actions,
    // resume-evidence at load ~20). A slow cleanup is not a failure of what the test proves.
    hookTimeout: 180_000,
    // Three workers on a 2-core machine: the crash suites are CPU-bound, but many Docker-backed
    // files wait on the engine (two of them used ~30% of both cores over 156 s), and a third worker
    // fills those gaps. Full suite, same machine: 2,892 s with two workers, 2,117 s with three.
    maxWorkers: 3,
    sequence: { sequencer: SlowFirstSequencer },
    // The CLI's bundle rebuilt if a source is newer (tests start the real `berth`), and, after the
    // run, store markers that imports into tests' temporary stores left (test/support/global-teardown.ts).
    globalSetup: ['test/support/global-build.ts', 'test/support/global-teardown.ts'],
  },
});
