import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const SESSIONS = 8;

it('a SQLite commit is visible to every read from its call on, before its answer (which waits for the shared flush), and commits asked for together are each answered on their own', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-shared-flush-'));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, 's.db'));
  try {
    for (let i = 0; i < SESSIONS; i++) {
      await store.commit({ sessionId: `ses_${i}`, label: 'seed', createSession: {}, tasks: [{ id: `task_${i}`, runId: null, parentId: null, kind: 'k', kindVersion: 1, phase: 'a', input: {} }] });
    }
    // One turn: every session's task moves; the last one asks with a stale version and is refused.
    const answers = Array.from({ length: SESSIONS }, (_, i) =>
      store.commit({ sessionId: `ses_${i}`, label: 'move', taskTransitions: [{ taskId: `task_${i}`, expectVersion: i === SESSIONS - 1 ? 7 : 1, set: { phase: 'b' } }] }),
    );
    // Read in the same turn, before any answer: the applied commits are there already (a decision
    // built from this read must not be refused for a commit of this process it could not see).
    const seen = await Promise.all(Array.from({ length: SESSIONS }, (_, i) => store.getTask(`task_${i}`)));
    expect(seen.map((t) => t!.phase)).toEqual([...Array(SESSIONS - 1).fill('b'), 'a']);
    const results = await Promise.all(answers);
    expect(results.slice(0, -1).every((r) => r.ok && r.tasks?.[0]?.phase === 'b')).toBe(true);
    expect(results.at(-1)).toMatchObject({ ok: false, conflict: { kind: 'task_version', taskId: `task_${SESSIONS - 1}` } });
  } finally {
    await store.close();
  }
});
