import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// `npm run bench -- serve` failed on a fresh clone ("the run page did not page its 10,000 entries":
// its run's plan input was null, and the page answered 400), and nothing ran it. This runs the
// suite itself, small, so a page or list change that breaks it fails here.
describe('the serve bench', { timeout: 300_000 }, () => {
  it('runs on a fresh store and prints every serve figure', async () => {
    const env = { ...process.env, BENCH_SERVE_ROUNDS: '3', BENCH_SERVE_LIVE_LINES: '3', BENCH_SERVE_LIST_RUNS: '400' };
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, ['node_modules/tsx/dist/cli.mjs', 'bench/run.ts', 'serve'], { env, timeout: 280_000, maxBuffer: 8 << 20 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(out.code, out.stderr).toBe(0);
    for (const figure of ['commit_to_event_ms_p50', 'run_page_10k_ms', 'live_line_to_browser_ms_p50', 'runs_list_10k_ms', 'runs_filter_10k_ms', 'runs_search_10k_ms', 'list_bytes_per_commit']) {
      expect(out.stdout, figure).toMatch(new RegExp(`^serve\\.${figure} = \\d`, 'm'));
    }
  });
});
