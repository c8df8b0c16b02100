import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';
import { containerStdout } from '../support/agent-observe';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

const exists = async (w: AgentWorld, containerId: string, file: string) =>
  (await containerStdout(w.docker, containerId, ['sh', '-c', `test -e /workspace/${file} && echo yes || echo no`])).trim() === 'yes';

describe('cancelling an agent run mid tool call', { timeout: 180_000 }, () => {
  it('kills the exec, records the call cancelled with its effect unknown (not a confirmed exit 137), and the run needs reconciliation', async () => {
    w = await agentWorld([{ toolCalls: [{ name: 'exec', arguments: { command: 'touch began && sleep 20 && touch late' } }] }, { content: 'never asked' }]);
    const world = w;
    const { run } = await world.start('deploy it');
    let containerId: string | undefined;
    while (!containerId) {
      const lease = (await world.rt.store.listLeases({ sessionId: run.sessionId })).find((l) => l.releasedAt === null && l.containerId !== '');
      if (lease && (await exists(world, lease.containerId, 'began'))) containerId = lease.containerId;
      else await sleep(200);
    }
    // What `berth cancel RUN` commits.
    const r = await world.rt.store.commit({ sessionId: run.sessionId, label: 'run.cancel', actor: 'user:test', runTransitions: [{ runId: run.id, from: 'running', to: 'cancelling', actor: 'user:test', reason: 'test' }], cancelTasks: [run.rootTaskId!] });
    expect(r.ok).toBe(true);
    const done = await world.rt.kernel.waitForRun(run.id);
    expect(done.state).toBe('needs_reconciliation');
    const tool = (await world.rt.store.listTasks({ runId: run.id })).find((t) => t.kind === 'agent-tool')!;
    const effect = (await world.rt.store.listEffects({ runId: run.id })).find((e) => e.kind === 'tool.exec')!;
    expect(effect.status).toBe('unknown');
    expect(tool.outcome).toBe('cancelled');
    expect(tool.result).toEqual({ cancelled: { effect: 'unknown', effectIds: [effect.id] } });
    await sleep(22_000);
    expect(await exists(world, containerId, 'late')).toBe(false);
    expect(world.model.requests).toHaveLength(1);
  });

  it('a cancel that reaches a never call waiting for its paused sandbox settles it as not sent (nothing ran): the run ends cancelled without asking anybody, never with a broken sandbox', async () => {
    let containerId = '';
    w = await agentWorld((turn) => {
      if (turn > 0) return { content: 'never asked' };
      // Synchronous, so the pause is in place before the answer that makes the call is sent.
      containerId = execFileSync('docker', ['ps', '-q', '--no-trunc', '--filter', `label=berth.host=${w!.hostId}`], { encoding: 'utf8' }).trim();
      execFileSync('docker', ['pause', containerId]);
      return { toolCalls: [{ name: 'exec', arguments: { command: 'touch /workspace/ran' } }] };
    });
    const world = w;
    const { run } = await world.start('deploy it');
    try {
      // The call has begun (its effect is executing): its exec is waiting on the paused sandbox.
      while (!(await world.rt.store.listEffects({ runId: run.id })).some((e) => e.status === 'executing')) await sleep(50);
      const r = await world.rt.store.commit({ sessionId: run.sessionId, label: 'run.cancel', actor: 'user:test', runTransitions: [{ runId: run.id, from: 'running', to: 'cancelling', actor: 'user:test', reason: 'test' }], cancelTasks: [run.rootTaskId!] });
      expect(r.ok).toBe(true);
      const ended = await world.rt.kernel.waitForRun(run.id, { states: ['cancelled', 'needs_reconciliation', 'failed', 'completed'] });
      // Before: needs_reconciliation, the exec's effect unknown, though the command never reached the sandbox.
      expect(ended.state).toBe('cancelled');
      expect(JSON.parse(execFileSync('docker', ['inspect', '-f', '{{json .State.Paused}}', containerId], { encoding: 'utf8' }))).toBe(true);
    } finally {
      if (containerId) execFileSync('docker', ['unpause', containerId]);
    }
    const tool = (await world.rt.store.listTasks({ runId: run.id })).find((t) => t.kind === 'agent-tool')!;
    expect(tool.outcome).toBe('cancelled');
    // Before: the call's effect was recorded sandbox_unavailable ("the sandbox container cannot run commands (HTTP 409)").
    const record = JSON.stringify({ tasks: await world.rt.store.listTasks({ runId: run.id }), effects: await world.rt.store.listEffects({ runId: run.id }), entries: await world.rt.store.listEntries(run.sessionId) });
    expect(record).not.toContain('sandbox_unavailable');
    expect(record).not.toContain('HTTP 409');
    expect(await exists(world, containerId, 'ran')).toBe(false);
    const effect = (await world.rt.store.listEffects({ runId: run.id })).find((e) => e.kind === 'tool.exec')!;
    expect(effect).toMatchObject({ replay: 'never', status: 'failed', error: { code: 'command_not_started', delivery: 'not_sent' } });
    expect(world.model.requests).toHaveLength(1);
  });
});
