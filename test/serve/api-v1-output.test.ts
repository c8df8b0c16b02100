import { afterEach, describe, expect, it } from 'vitest';
import { Berth, type RunOrOutputEvent } from '../../host/index';
import { containerStdout } from '../support/agent-observe';
import { planFixture } from '../support/plan-fixture';
import { cliChild, Cleanups, TICKING, waitFor } from '../support/live-step';
import { startServeChild } from '../support/serve-browser';

// The SDK's events carry a running step's live output: through `/api/v1` (Berth.connect, a real
// server child) and in process (Berth.open), with a real host child killed by SIGKILL mid-step.

type Fixture = Awaited<ReturnType<typeof planFixture>>;
const cleanups = new Cleanups();
afterEach(() => cleanups.run(), 240_000);
const cli = (fx: Fixture, args: string[]) => cliChild(fx, args, cleanups);

/** Collects a follow in the background; `done` settles when the iterator ends. */
function collect(it: AsyncIterable<RunOrOutputEvent>) {
  const seen: RunOrOutputEvent[] = [];
  const done = (async () => {
    for await (const e of it) seen.push(e);
  })();
  return { seen, done };
}

const printed = (seen: RunOrOutputEvent[], attempt?: string) =>
  seen.flatMap((e) => (e.type === 'output' && e.channel === 'stdout' && (!attempt || e.attempt === attempt) ? [e.text] : [])).join('');

describe('live output through the SDK events', { timeout: 400_000 }, () => {
  it('a remote client and an in-process host see each line of a running step before it ends, and after a SIGKILL of the host and a resume the killed attempt\'s partial output marked interrupted before the new attempt\'s', async () => {
    const fx = await planFixture([{ name: 'ticking', run: TICKING }]);
    cleanups.push(() => fx.cleanup());
    const host = await cli(fx, ['run', fx.plan]);
    const runId = await waitFor('the run', async () => (await fx.read((s) => s.listRuns()))[0]?.id);
    const server = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => server.stop());
    const remote = Berth.connect({ url: server.url, token: new URL(server.login!).searchParams.get('token'), reconnectMs: 200 });
    const local = await Berth.open({ store: fx.store, hostId: fx.hostId });
    cleanups.push(() => local.close());
    const viaApi = collect(remote.events(runId, { output: true }));
    const inProcess = collect(local.events(runId, { output: true }));

    // Lines arrive while the step loops: it cannot end before the release file exists.
    for (const f of [viaApi, inProcess]) await waitFor('tick 3 through the SDK', async () => printed(f.seen).includes('tick 3\n'));
    const stored = await fx.read((s) => s.listOutput({ runId }));
    expect(stored.some((c) => c.channel === 'end')).toBe(false);
    expect(printed(viaApi.seen)).not.toContain('released');
    const first = stored[0]!.attempt;

    host.child.kill('SIGKILL');
    await host.ended;
    const resumed = await cli(fx, ['resume', runId]);
    const second = await waitFor('the second attempt', async () => (await fx.read((s) => s.listOutput({ runId }))).find((c) => c.attempt !== first && c.text.includes('tick 1'))?.attempt);
    for (const f of [viaApi, inProcess]) await waitFor('the second attempt through the SDK', async () => printed(f.seen, second).includes('tick 1\n'));
    const lease = await waitFor('the sandbox', () => fx.read(async (s) => (await s.listLeases({})).find((l) => l.runId === runId && l.releasedAt === null && l.containerId)?.containerId));
    await containerStdout(fx.docker, lease, ['touch', '/tmp/release']);
    expect(await resumed.ended).toBe(0);
    await Promise.all([viaApi.done, inProcess.done]);

    const all = await fx.read((s) => s.listOutput({ runId }));
    const commits = await fx.read(async (s) => s.listCommitLog({ sessionId: (await s.getRun(runId))!.sessionId }));
    // A follow started after the end replays the same: the marks come from the server then.
    const replay = collect(remote.events(runId, { output: true }));
    await replay.done;
    for (const seen of [viaApi.seen, inProcess.seen, replay.seen]) {
      // Every chunk once, every commit once.
      expect(seen.flatMap((e) => (e.type === 'output' ? [e.seq] : []))).toEqual(all.map((c) => c.seq));
      expect(seen.flatMap((e) => (e.type === 'commit' ? [e.seq] : []))).toEqual(commits.map((c) => c.seq));
      const output = seen.filter((e) => e.type !== 'commit');
      const cut = output.filter((e) => e.type === 'interrupted');
      expect(cut).toEqual([expect.objectContaining({ type: 'interrupted', attempt: first, source: 'step:0', label: 'ticking', why: 'a newer attempt started' })]);
      // The mark follows the killed attempt's last line and comes before the new attempt's first.
      const at = output.indexOf(cut[0]!);
      expect(output.slice(0, at).every((e) => e.type === 'output' && e.attempt === first)).toBe(true);
      expect(output.slice(at + 1).every((e) => e.type === 'output' && e.attempt === second)).toBe(true);
      expect(printed(seen, first)).toContain('tick 3\n');
      expect(printed(seen, second)).toContain('released\n');
      expect(output.at(-1)).toMatchObject({ type: 'output', attempt: second, channel: 'end' });
      expect(seen.filter((e) => e.type === 'commit').at(-1)).toMatchObject({ state: 'completed' });
    }
  });
});
