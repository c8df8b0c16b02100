import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import type { CommitInput, Store } from '../../host/store';

/**
 * Names every commit of an agent run by what it is, not by when it happened:
 * `label|task|occurrence`, where `task` is stable across runs (`agent`, `gen3`, `tool:call_2_0`)
 * and `occurrence` counts earlier successful commits with the same label and task. A crash test
 * uses these keys to say exactly which boundary of the uninterrupted run a kill hit, also when a
 * run was killed before and took a recovery detour (a retried request has a new occurrence).
 *
 * Each commit appends `B key` just before the store commits (the fault points are inside that
 * call) and `A key` once it succeeded, to `file`, which the processes of one run share.
 */
export async function withCommitKeys<S extends Store>(store: S, file: string): Promise<S> {
  const names = new Map<string, string>();
  const name = (kind: string, input: unknown): string => {
    const i = (input ?? {}) as { turn?: number; toolCallId?: string };
    if (kind === 'agent-generate') return `gen${i.turn}`;
    if (kind === 'agent-tool') return `tool:${i.toolCallId}`;
    if (kind === 'agent-approval-timer') return `timer:${i.toolCallId}`;
    return kind;
  };
  for (const t of await store.listTasks()) names.set(t.id, name(t.kind, t.input));
  const done = new Map<string, number>();
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.startsWith('A ')) continue;
      const k = line.slice(2, line.lastIndexOf('|'));
      done.set(k, (done.get(k) ?? 0) + 1);
    }
  }
  const inner = store.commit.bind(store);
  const commit = (input: CommitInput) => {
    for (const t of input.tasks ?? []) names.set(t.id, name(t.kind, t.input));
    const taskId = input.taskTransitions?.[0]?.taskId ?? input.expectTasks?.[0]?.taskId ?? input.tasks?.[0]?.id;
    const base = `${input.label}|${taskId ? (names.get(taskId) ?? '?') : '-'}`;
    const key = `${base}|${(done.get(base) ?? 0) + 1}`;
    appendFileSync(file, `B ${key}\n`);
    // Called synchronously right after the B line: the store's fault points run before any other commit can start.
    return inner(input).then((r) => {
      if (r.ok) {
        done.set(base, (done.get(base) ?? 0) + 1);
        appendFileSync(file, `A ${key}\n`);
      }
      return r;
    });
  };
  return Object.assign(Object.create(store) as S, { commit });
}

/** The keys a keys file holds, by line kind. */
export function readCommitKeys(file: string): Array<{ kind: 'B' | 'A'; key: string }> {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => ({ kind: l[0] as 'B' | 'A', key: l.slice(2) }));
}

/** Marks a commit as done when its process died right after it (an `after:` kill), before the A line. */
export function markDone(file: string, key: string): void {
  appendFileSync(file, `A ${key}\n`);
}
