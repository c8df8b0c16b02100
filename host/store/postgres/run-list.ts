import type pg from 'pg';
import { FIRST_STATES, likePattern, nameFromMeta, type RunListReads } from '../run-list';
import { parseMeta } from '../sqlite/run-list';
import { toRun } from '../sqlite/rows';
import { query } from './open';

/** The runs page's reads (see the SQLite twin). */
export function postgresRunList(pool: pg.Pool): RunListReads {
  return {
    async listRunPage(q) {
      const where: string[] = [];
      const args: unknown[] = [];
      const arg = (v: unknown) => (args.push(v), `$${args.length}`);
      if (q.states?.length) where.push(`r.state = ANY(${arg(q.states)})`);
      if (q.sessionIds) where.push(`r.session_id = ANY(${arg(q.sessionIds)})`);
      if (q.createdFrom !== undefined) where.push(`r.created_at >= ${arg(q.createdFrom)}`);
      if (q.createdTo !== undefined) where.push(`r.created_at < ${arg(q.createdTo)}`);
      if (q.search) {
        const p = arg(likePattern(q.search));
        where.push(`(r.id ILIKE ${p} OR s.meta_json::jsonb ->> 'name' ILIKE ${p} OR s.meta_json::jsonb ->> 'task' ILIKE ${p})`);
      }
      const from = `FROM runs r JOIN sessions s ON s.id = r.session_id${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`;
      const first = FIRST_STATES.map((s) => `'${s}'`).join(',');
      const countArgs = [...args];
      const rows = await query(pool, `SELECT r.*, s.meta_json AS session_meta ${from} ORDER BY CASE WHEN r.state IN (${first}) THEN 0 ELSE 1 END, r.created_at DESC, r.id DESC LIMIT ${arg(Math.floor(q.limit))} OFFSET ${arg(Math.floor(q.offset ?? 0))}`, args);
      const [count] = await query<{ n: number }>(pool, `SELECT COUNT(*)::bigint AS n ${from}`, countArgs);
      return { runs: rows.map((r) => ({ ...toRun(r), name: nameFromMeta(parseMeta(r.session_meta)) })), total: Number(count?.n ?? 0) };
    },
  };
}
