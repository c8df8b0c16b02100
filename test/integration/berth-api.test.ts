import { afterEach, describe, expect, it } from 'vitest';
import { Berth } from '../../host/index';
import { finishedStepCounts, stepRunning, waitFor } from '../support/fleet';
import { planFixture, removeHostArtifacts } from '../support/plan-fixture';
import { tinyEnvironment } from '../support/agent-environment';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { startModelServer } from '../support/model-server';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let fx: Awaited<ReturnType<typeof planFixture>> | undefined;
afterEach(async () => {
  await fx?.cleanup();
  fx = undefined;
});

describe('the in-process host API', { timeout: 300_000 }, () => {
  it('a drive stopped by its AbortSignal decides nothing: the run keeps its state and sandbox, and a later drive of a new host finishes it with every step once', async () => {
    fx = await planFixture([
      { name: 'one', run: 'echo one >> steps.log' },
      { name: 'slow', run: 'sleep 3 && echo slow >> steps.log' },
      { name: 'three', run: 'echo three >> steps.log' },
    ]);
    let runId: string;
    {
      await using berth = await Berth.open({ store: fx.store, hostId: fx.hostId });
      const { run } = await berth.submitPlan(fx.plan, { requestId: 'api-1' });
      runId = run.id;
      const stop = new AbortController();
      const driving = berth.drive(run.id, { signal: stop.signal });
      await waitFor('step slow to run', () => stepRunning(fx!, run.id, 1));
      stop.abort();
      const stopped = await driving;
      expect(stopped.settled).toBe(false);
      expect(stopped.run.state).toBe('running');
    }
    await using again = await Berth.open({ store: fx.store, hostId: fx.hostId });
    const end = await again.drive(runId);
    expect(end).toMatchObject({ settled: true, run: { state: 'completed' } });
    expect(await finishedStepCounts(fx, runId)).toEqual({ one: 1, slow: 1, three: 1 });
    // Run end applied by the API: the run's sandbox is released.
    const leases = await fx.read((s) => s.listLeases({ runId }));
    expect(leases.every((l) => l.releasedAt !== null)).toBe(true);
  });

  it('a program continues an agent session through the API: chat after a finished drive is submitted and driven like berth chat (it was refused as driven by another live host)', async () => {
    const docker = await requireEngine();
    const imageId = await requireTinyImage(docker);
    const model = await startModelServer([{ content: 'first answer' }, { content: 'second answer' }]);
    const dir = mkdtempSync(join(tmpdir(), 'berth-api-chat-'));
    const hostId = `api-chat-${process.pid}`;
    process.env.BERTH_API_TEST_KEY = 'sk-api-test';
    try {
      await using berth = await Berth.open({ store: join(dir, 'berth.db'), hostId });
      const settings = { model: { baseUrl: model.url, model: 'scripted-1', apiKeyEnv: 'BERTH_API_TEST_KEY' } };
      const { run } = await berth.submitAgent({ message: 'hello', settings, environment: tinyEnvironment(imageId, { snapshot: 'never' }), requestId: 'api-chat-1' });
      expect((await berth.drive(run.id)).run.state).toBe('completed');
      const next = await berth.chat({ sessionId: run.sessionId, message: 'and again', requestId: 'api-chat-2' });
      expect(next.created).toBe(true);
      expect((await berth.drive(next.run.id)).run.state).toBe('completed');
      expect(model.requests).toHaveLength(2);
      expect(model.requests[1]!.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    } finally {
      await model.close();
      await removeHostArtifacts(docker, hostId);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
