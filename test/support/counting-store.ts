import type { Store } from '../../host/store';

/**
 * A store whose list reads count the rows they answer, by method (a listTasks by status, which
 * reads the active tasks only, counts as `listTasks:active`; a listSnapshots of the newest N as
 * `listSnapshots:newest`). Reads by key answer one row and are
 * not counted: what grows with a run is a list.
 */
export function countingStore(store: Store): { store: Store; rows: Map<string, number>; total(): number } {
  const rows = new Map<string, number>();
  const counted = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || typeof v !== 'function' || !prop.startsWith('list')) return v;
      return async (...args: unknown[]) => {
        const answer = (await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)) as unknown;
        const filter = args[0] as { statuses?: unknown; newest?: unknown } | undefined;
        const key = prop === 'listTasks' && filter?.statuses ? 'listTasks:active' : prop === 'listSnapshots' && filter?.newest !== undefined ? 'listSnapshots:newest' : prop;
        if (Array.isArray(answer)) rows.set(key, (rows.get(key) ?? 0) + answer.length);
        return answer;
      };
    },
  });
  return { store: counted, rows, total: () => [...rows.values()].reduce((a, b) => a + b, 0) };
}
