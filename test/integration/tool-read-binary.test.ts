import { afterEach, describe, expect, it } from 'vitest';
import { ENTRY, type ToolResultEntry } from '../../host/agent';
import { agentWorld, type AgentWorld } from '../support/agent-fixture';

let w: AgentWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('read_file', { timeout: 180_000 }, () => {
  it('refuses a binary file, naming its size, instead of handing the model its bytes as text; an 8-bit text file still reads', async () => {
    w = await agentWorld([
      { toolCalls: [{ name: 'exec', arguments: { command: "head -c 300000 /dev/zero | tr '\\0' 'x' > blob.bin; printf '\\000\\001\\002' >> blob.bin; printf 'ELF\\000\\001' | cat - blob.bin > head.bin; printf 'caf\\351 au lait\\n' > latin1.txt" } }] },
      { toolCalls: [{ name: 'read_file', arguments: { path: 'head.bin' } }, { name: 'read_file', arguments: { path: 'head.bin', offset: 1, limit: 2 } }, { name: 'read_file', arguments: { path: 'latin1.txt' } }] },
      { content: 'done' },
    ]);
    const { run } = await w.start('read them');
    expect((await w.rt.kernel.waitForRun(run.id)).state).toBe('completed');
    const results = (await w.rt.store.listEntries(run.sessionId)).filter((e) => e.kind === ENTRY.toolResult).map((e) => e.body as unknown as ToolResultEntry);
    const [, whole, range, latin1] = results;
    for (const r of [whole!, range!]) {
      // The call answered (its effect is confirmed), refusing: status error, not ok, and an error for the model.
      expect([r.status, r.isError]).toEqual(['error', true]);
      expect(r.content).toBe('error: head.bin is a binary file (300008 bytes); read_file shows text. Look into it with exec (od -c, head -c, file).');
    }
    expect([latin1!.status, latin1!.isError]).toEqual(['ok', false]);
    expect(latin1!.content).toMatch(/^caf. au lait\n$/);
  });
});
