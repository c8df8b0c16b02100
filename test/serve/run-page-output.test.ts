import { describe, expect, it } from 'vitest';
import { describeRun } from '../../host/cli/commands/runs';
import { ATTEMPT_TAIL, attemptViews, readRunView, runIsLive } from '../../host/serve/run-view';
import type { ServeDeps } from '../../host/serve/deps';
import type { Store } from '../../host/store';
import { CHUNK, loudRun, RUN } from '../support/loud-output';
import { freshStores } from '../support/store-kinds';

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

describe('a run page of a run that printed megabytes', () => {
  const fresh = freshStores('sqlite');
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
