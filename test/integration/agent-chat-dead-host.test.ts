import { afterEach, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('berth chat on a session whose host died', { timeout: 180_000 }, () => {
  it('names berth resume for the run no host drives any more, instead of asking to let it finish', async () => {
    w = await cliWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: 'echo sent >> /tmp/sent.log' } }] },
      { content: 'Done.' },
    ]);
    // Killed with the tool call in flight: the run stays running, its host is gone.
    const killed = await w.cli([...w.agentArgs('send it')], { BERTH_FAULT: 'after:effect.begin:agent-tool' });
    expect(killed.signal).toBe('SIGKILL');
    const run = await w.read(async (s) => (await s.listRuns())[0]!);
    expect(run.state).toBe('running');
    const chat = await w.cli(['chat', run.sessionId, 'and then?', '--api-key-env', 'TEST_MODEL_KEY']);
    expect(chat.code).not.toBe(0);
    expect(chat.stderr).toContain(`berth resume ${run.id}`);
    expect(chat.stderr).toContain('session_needs_resume');
    expect(chat.stderr).not.toContain('let it finish');
    expect(await w.read((s) => s.listRuns({ sessionId: run.sessionId }))).toHaveLength(1);
  });
});
