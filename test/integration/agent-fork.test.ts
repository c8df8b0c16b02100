import { afterEach, describe, expect, it } from 'vitest';
import { sessionSandboxDocId, type SandboxState } from '../../host/agent';
import type { Store } from '../../host/store';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';
import type { RecordedRequest, ScriptedTurn } from '../support/model-server';
import { lastJson } from '../support/plan-fixture';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

/**
 * A model that answers the newest message: `write N` writes fN.txt, `list` lists the workspace,
 * and a tool result is answered with its first line. The answer depends only on the conversation,
 * so a forked session gets the same answers as its original would.
 */
function scripted(_turn: number, body: RecordedRequest['body']): ScriptedTurn {
  const last = body.messages.at(-1)!;
  if (last.role === 'tool') return { content: `done: ${String(last.content ?? '').split('--- stdout ---').at(-1)!.split('\n').join(' ').trim()}` };
  const text = String(last.content ?? '');
  const write = /^write (\d+)$/.exec(text);
  if (write) return { toolCalls: [{ name: 'write_file', arguments: { path: `f${write[1]}.txt`, content: `${write[1]}\n` } }] };
  if (text === 'list') return { toolCalls: [{ name: 'exec', arguments: { command: 'ls f*.txt' } }] };
  return { content: `unknown request: ${text}` };
}

type Answer = { run: { id: string; sessionId: string; state: string }; answer: string };

/** The workspace digest a session's newest committed state vouches for. */
async function sessionDigest(s: Store, sessionId: string): Promise<string | null> {
  let best: SandboxState | null = null;
  for (const t of await s.listTasks({ sessionId })) {
    const st = (t.result as { sandbox?: SandboxState } | null)?.sandbox;
    if (st && (!best || st.measuredAt > best.measuredAt)) best = st;
  }
  if (best) return best.workspaceDigest;
  const doc = await s.getDocument(sessionSandboxDocId(sessionId));
  return (doc?.baseline as { workspaceDigest?: string } | undefined)?.workspaceDigest ?? null;
}

describe('berth fork SESSION --at TURN', { timeout: 600_000 }, () => {
  it('forks a 4-turn session at turn 2: the fork has that turn\'s conversation and workspace, and both sessions go on independently', async () => {
    w = await cliWorld(scripted, { snapshotPolicy: 'after-each-step' });
    const first = lastJson<Answer>(await w.cli([...w.agentArgs('write 1'), '--json']));
    const session = first.run.sessionId;
    const digests: string[] = [];
    digests.push((await w.read((s) => sessionDigest(s, session)))!);
    for (const n of [2, 3, 4]) {
      const end = await w.cli(['chat', session, `write ${n}`, '--json']);
      expect(end.code, end.stderr).toBe(0);
      digests.push((await w.read((s) => sessionDigest(s, session)))!);
    }
    expect(new Set(digests).size).toBe(4);

    const forked = await w.cli(['fork', session, '--at', '2', '--json']);
    expect(forked.code, forked.stderr).toBe(0);
    const f = lastJson<{ sessionId: string; forkedFrom: { runId: string; checkpoint: string } }>(forked);
    expect(f.forkedFrom.checkpoint).toBe('turn:2');
    expect(await w.read((s) => sessionDigest(s, f.sessionId))).toBe(digests[1]);

    const listed = await w.cli(['chat', f.sessionId, 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(lastJson<Answer>(listed).answer).toBe('done: f1.txt f2.txt');
    // The model saw the conversation up to turn 2 and the new message, nothing of turns 3 and 4.
    const users = w.model.requests.at(-2)!.body.messages.filter((m) => m.role === 'user').map((m) => m.content);
    expect(users).toEqual(['write 1', 'write 2', 'list']);

    const original = await w.cli(['chat', session, 'list', '--json']);
    expect(original.code, original.stderr).toBe(0);
    expect(lastJson<Answer>(original).answer).toBe('done: f1.txt f2.txt f3.txt f4.txt');

    // Lineage: the fork's first run names the run of turn 2 as its parent.
    const tree = lastJson<{ runId: string; children: Array<{ runId: string; forkedFrom: { checkpoint: string } }> }>(await w.cli(['tree', f.forkedFrom.runId, '--json']));
    expect(tree.runId).toBe(f.forkedFrom.runId);
    const all = JSON.stringify(tree);
    expect(all).toContain(lastJson<Answer>(listed).run.id);
  });

  it('refuses a turn the session does not have and a session whose environment keeps no snapshots', async () => {
    w = await cliWorld(scripted);
    const first = lastJson<Answer>(await w.cli([...w.agentArgs('write 1'), '--json']));
    const beyond = await w.cli(['fork', first.run.sessionId, '--at', '3']);
    expect(beyond.code).toBe(1);
    expect(beyond.stderr).toContain('has turns 1-1');
    const none = await w.cli(['fork', first.run.sessionId, '--at', '1']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("snapshot.policy is not after-each-step");
    expect(await w.read((s) => s.listRuns())).toHaveLength(1);
  });

  it('forks a fork again at a turn that changed no file: the new fork starts from the workspace its parent began with', async () => {
    w = await cliWorld(scripted, { snapshotPolicy: 'after-each-step' });
    const first = lastJson<Answer>(await w.cli([...w.agentArgs('write 1'), '--json']));
    const b = lastJson<{ sessionId: string }>(await w.cli(['fork', first.run.sessionId, '--at', '1', '--json']));
    const said = await w.cli(['chat', b.sessionId, 'hello', '--json']);
    expect(said.code, said.stderr).toBe(0);
    expect(lastJson<Answer>(said).answer).toBe('unknown request: hello');
    // Turn 1 of the fork ran no tool: its workspace is the one the fork began with.
    const again = await w.cli(['fork', b.sessionId, '--at', '1', '--json']);
    expect(again.code, again.stderr).toBe(0);
    const c = lastJson<{ sessionId: string; forkedFrom: { checkpoint: string } }>(again);
    expect(c.forkedFrom.checkpoint).toBe('turn:1');
    expect(await w.read((s) => sessionDigest(s, c.sessionId))).toBe(await w.read((s) => sessionDigest(s, b.sessionId)));
    const listed = await w.cli(['chat', c.sessionId, 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(lastJson<Answer>(listed).answer).toBe('done: f1.txt');
  });
});
