import { afterAll, describe, expect, it } from 'vitest';
import { describeRun } from '../../host/cli/commands/runs';
import { ATTEMPT_TAIL, ENTRY_PAGE, attemptViews, readRunView, runIsLive } from '../../host/serve/run-view';
import { ENTRY } from '../../host/agent/entries';
import type { ServeDeps } from '../../host/serve/deps';
import type { Store } from '../../host/store';
import { CHUNK, loudRun, RUN } from '../support/loud-output';
import { countingStore } from '../support/counting-store';
import { freshStores, STORE_KINDS, stopSharedPostgres } from '../support/store-kinds';

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

afterAll(stopSharedPostgres);

describe.each(STORE_KINDS)('a run page of a long agent run (%s store)', (kind) => {
  const fresh = freshStores(kind);
  it('shows the run\'s token totals summed by the store, reading only the newest page of entries', async () => {
    const t = await fresh();
    const run = 'run_chatty';
    await t.store.commit({ sessionId: 'ses_chatty', label: 'submit', createSession: {}, runs: [{ id: run, kind: 'agent', submissionId: null, rootTaskId: null, versions: {} }] });
    const calls = 3 * ENTRY_PAGE;
    for (let k = 0; k < calls; k += 50) {
      const entries = Array.from({ length: 50 }, (_, i) => {
        const n = k + i;
        const usage = n % 10 === 9 ? null : { promptTokens: 100 + n, completionTokens: 10 + (n % 7), totalTokens: 110 + n + (n % 7) };
        return { id: `ent_m${n}`, conversationId: null, runId: run, taskId: null, kind: ENTRY.model, body: { turn: n, content: 'x'.repeat(2000), toolCalls: [], finishReason: 'stop', model: 'm', usage } };
      });
      await t.store.commit({ sessionId: 'ses_chatty', label: 'model', entries });
    }
    let prompt = 0;
    let completion = 0;
    let total = 0;
    for (let n = 0; n < calls; n++) if (n % 10 !== 9) (prompt += 100 + n, completion += 10 + (n % 7), total += 110 + n + (n % 7));
    const seen = countingStore(t.store);
    const deps = { store: seen.store, describe: (id: string) => describeRun(t.store, id), ownerLine: async () => 'owner', operator: 'user:t', token: null } as unknown as ServeDeps;
    const view = await readRunView(deps, run);
    expect(view.tokens).toEqual({ prompt, completion, total });
    // Before: every entry of the run (300 here, thousands in a long run) at each render.
    expect((seen.rows.get('listEntries') ?? 0) + (seen.rows.get('listEntriesNewest') ?? 0)).toBeLessThanOrEqual(ENTRY_PAGE + 1);
  });
});
