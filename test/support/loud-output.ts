import type { NewOutputChunk, Store } from '../../host/store';

/** The most characters the output writer puts in one chunk (host/output). */
export const CHUNK = 32_000;
export const RUN = 'run_loud';

/**
 * A run whose steps printed a lot: one attempt of 200 full chunks (6.4 MB) alternating stdout and
 * stderr blocks, with bytes cut by the cap near its end and an end chunk; one of 1,500 small
 * chunks (a step printing a line at a time) with no end; one that printed a line.
 */
export async function loudRun(store: Store) {
  await store.commit({ sessionId: 'ses_loud', label: 'submit', createSession: { meta: { name: 'loud' } }, runs: [{ id: RUN, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
  const base = { runId: RUN, at: Date.now() };
  const big: NewOutputChunk[] = Array.from({ length: 200 }, (_, n) => ({ ...base, source: 'step:0', label: 'build', attempt: 'att_big', n, channel: n % 7 < 5 ? 'stdout' : 'stderr', text: `${n}:`.padEnd(CHUNK, String.fromCharCode(97 + (n % 26))), cutBytes: n < 195 ? 0 : (n - 194) * 1000 }));
  big.push({ ...base, source: 'step:0', label: 'build', attempt: 'att_big', n: 200, channel: 'end', text: 'exit 0 after 9000 ms', cutBytes: 5000 });
  const lines: NewOutputChunk[] = Array.from({ length: 1500 }, (_, n) => ({ ...base, source: 'step:1', label: 'test', attempt: 'att_lines', n, channel: n % 10 ? 'stdout' : 'stderr', text: `line ${n} of a step printing a line at a time\n`, cutBytes: 0 }));
  const one: NewOutputChunk[] = [{ ...base, source: 'step:2', label: 'tail', attempt: 'att_one', n: 0, channel: 'stdout', text: 'one line\n', cutBytes: 0 }];
  for (const chunks of [big, lines, one]) for (let k = 0; k < chunks.length; k += 100) await store.appendOutput(chunks.slice(k, k + 100));
}
