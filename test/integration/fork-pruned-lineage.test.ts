import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../host/model';
import { lastJson, planFixture } from '../support/plan-fixture';

type Summary = { run: Run };
const errorOf = (stderr: string) => (JSON.parse(stderr.trim().split('\n').pop()!) as { error: { code: string; message: string } }).error;

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('a fork of a fork whose history gc pruned', { timeout: 300_000 }, () => {
  it('refuses a pruned point naming only checkpoints of the fork\'s own history, each of which forks', async () => {
    fx = await planFixture([{ name: 'a', run: 'echo a > a' }, { name: 'b', run: 'echo b > b' }, { name: 'c', run: 'echo c > c' }]);
    const idOf = async (args: string[]) => {
      const end = await fx!.cli([...args, '--json']);
      expect(end.code, end.stderr).toBe(0);
      return lastJson<Summary>(end).run.id;
    };
    const a = await idOf(['run', fx.plan]);
    const b = await idOf(['fork', a, '--at', 'a']);
    const c = await idOf(['fork', b, '--at', 'b']);
    const gc = await fx.cli(['gc', '--keep', '1']);
    expect(gc.code, gc.stderr).toBe(0);

    // C's history: A up to step a, B's step b, then C's own step c. A's and B's step c are not in it.
    const ownC = (await fx.read((s) => s.listSnapshots({ runId: c }))).filter((s) => s.prunedAt === null).map((s) => s.id);
    const notHistory = (await fx.read(async (s) => [...(await s.listSnapshots({ runId: a })), ...(await s.listSnapshots({ runId: b }))])).filter((s) => s.checkpoint === 'step:2:c').map((s) => s.id);
    expect(ownC).toHaveLength(1);
    for (const at of ['upload', 'a', 'b']) {
      const r = await fx.cli(['fork', c, '--at', at, '--detach', '--json']);
      expect(r.code, r.stderr).toBe(1);
      const err = errorOf(r.stderr);
      expect(err.code).toBe('snapshot_pruned');
      expect(err.message, at).toContain(ownC[0]);
      for (const id of notHistory) expect(err.message, at).not.toContain(id);
    }
    // What the refusal offers is what a fork of C takes.
    const offered = await fx.cli(['fork', c, '--at', ownC[0]!, '--detach', '--json']);
    expect(offered.code, offered.stderr).toBe(0);
  });
});
