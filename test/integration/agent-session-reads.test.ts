import { afterEach, describe, expect, it } from 'vitest';
import { continueSession } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { countingStore } from '../support/counting-store';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
}, 120_000);

describe('a long agent session continued message after message', { timeout: 600_000 }, () => {
  // Every `berth chat` message and every MCP call is a run of its session: a read of all of them
  // per message made each call slower than the one before (bench/RESULTS.md, session 20).
  it('continues a session of 25 finished runs reading its newest run and its open ones, not all 25', async () => {
    w = await agentWorld(() => ({ content: 'done' }));
    const deps = () => ({ ...w!.rt, toolNames: [...w!.rt.agent.tools.keys()] });
    const first = await w.start('message 1');
    expect((await w.rt.kernel.waitForRun(first.run.id)).state).toBe('completed');
    const sessionId = first.run.sessionId;
    for (let i = 2; i <= 25; i++) {
      const next = await continueSession(deps(), { sessionId, message: `message ${i}` });
      expect((await w.rt.kernel.waitForRun(next.run.id)).state).toBe('completed');
    }
    const c = countingStore(w.rt.store);
    const last = await continueSession({ ...deps(), store: c.store }, { sessionId, message: 'message 26' });
    // The newest (one row) and the open ones (none): before, every run of the session, 25 rows.
    expect(c.rows.get('listRuns')).toBe(1);
    const done = await w.rt.kernel.waitForRun(last.run.id);
    expect(done.state).toBe('completed');
    const runs = await w.rt.store.listRuns({ sessionId });
    expect(runs).toHaveLength(26);
    expect(runs.at(-1)!.id).toBe(last.run.id);
    // The same newest run by the new filter, on a session whose list is long.
    expect((await w.rt.store.listRuns({ sessionId, kind: 'agent', newest: 2 })).map((r) => r.id)).toEqual(runs.slice(-2).map((r) => r.id));
  });
});
