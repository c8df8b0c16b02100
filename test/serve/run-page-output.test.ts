import { afterAll, describe, expect, it } from 'vitest';
import { describeRun } from '../../host/cli/commands/runs';
import { ATTEMPT_TAIL, attemptViews, readRunView, runIsLive } from '../../host/serve/run-view';
import type { ServeDeps } from '../../host/serve/deps';
import type { NewOutputChunk, Store } from '../../host/store';
import { freshStores, STORE_KINDS, stopSharedPostgres } from '../support/store-kinds';

afterAll(stopSharedPostgres, 60_000);

/** The most characters the output writer puts in one chunk (host/output). */
const CHUNK = 32_000;
const RUN = 'run_loud';

/**
 * A run whose steps printed a lot: one attempt of 200 full chunks (6.4 MB) alternating stdout and
 * stderr blocks, with bytes cut by the cap near its end and an end chunk; one of 1,500 small
 * chunks (a step printing a line at a time) with no end; one that printed a line.
 */
async function loudRun(store: Store) {
  await store.commit({ sessionId: 'ses_loud', label: 'submit', createSession: { meta: { name: 'loud' } }, runs: [{ id: RUN, kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
  const base = { runId: RUN, at: Date.now() };
  const big: NewOutputChunk[] = Array.from({ length: 200 }, (_, n) => ({ ...base, source: 'step:0', label: 'build', attempt: 'att_big', n, channel: n % 7 < 5 ? 'stdout' : 'stderr', text: `${n}:`.padEnd(CHUNK, String.fromCharCode(97 + (n % 26))), cutBytes: n < 195 ? 0 : (n - 194) * 1000 }));
  big.push({ ...base, source: 'step:0', label: 'build', attempt: 'att_big', n: 200, channel: 'end', text: 'exit 0 after 9000 ms', cutBytes: 5000 });
  const lines: NewOutputChunk[] = Array.from({ length: 1500 }, (_, n) => ({ ...base, source: 'step:1', label: 'test', attempt: 'att_lines', n, channel: n % 10 ? 'stdout' : 'stderr', text: `line ${n} of a step printing a line at a time\n`, cutBytes: 0 }));
  const one: NewOutputChunk[] = [{ ...base, source: 'step:2', label: 'tail', attempt: 'att_one', n: 0, channel: 'stdout', text: 'one line\n', cutBytes: 0 }];
  for (const chunks of [big, lines, one]) for (let k = 0; k < chunks.length; k += 100) await store.appendOutput(chunks.slice(k, k + 100));
}

/** The store as the page uses it, counting the characters of output chunks each read hands back. */
function counting(store: Store): { store: Store; chars: () => number } {
  let chars = 0;
  const add = (r: unknown) => {
    if (Array.isArray(r)) for (const x of r) if (x && typeof x === 'object' && 'attempt' in x && typeof (x as { text?: unknown }).text === 'string') chars += (x as { text: string }).text.length;
    return r;
  };
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const r = (v as (...a: unknown[]) => unknown).apply(target, args);
        return r instanceof Promise ? r.then(add) : add(r);
      };
    },
  });
  return { store: wrapped, chars: () => chars };
}

describe.each(STORE_KINDS)('a run page of a run that printed megabytes, on %s', (kind) => {
  const fresh = freshStores(kind);
  it('reads only the end of each attempt\'s output however much it printed, and shows the same attempts and tails as a read of all of it', async () => {
    const t = await fresh();
    await loudRun(t.store);
    const seen = counting(t.store);
    const deps = { store: seen.store, describe: (id: string) => describeRun(t.store, id), ownerLine: async () => 'owner', operator: 'user:t', token: null } as unknown as ServeDeps;
    const view = await readRunView(deps, RUN);
    // Three attempts: at most a few chunks each beyond the characters shown, never the 6.4 MB and 1,500 rows.
    expect(seen.chars()).toBeLessThanOrEqual(3 * (ATTEMPT_TAIL + 4 * CHUNK));
    const all = attemptViews(await t.store.listOutput({ runId: RUN }), runIsLive(view.run.state));
    expect(view.output).toEqual(all);
    const [big, lines, one] = view.output;
    expect(big!.parts.map((p) => p.text).join('').length).toBe(ATTEMPT_TAIL);
    expect(big!.parts.at(-1)!.text.endsWith('r')).toBe(true);
    expect(big!).toMatchObject({ end: 'exit 0 after 9000 ms', cutBytes: 5000, state: 'ended' });
    expect(lines!.parts.at(-1)!.text.endsWith('line 1499 of a step printing a line at a time\n')).toBe(true);
    expect(one!.parts).toEqual([{ channel: 'stdout', text: 'one line\n' }]);
  });
});
