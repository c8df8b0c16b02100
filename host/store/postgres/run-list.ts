import type pg from 'pg';
import { FIRST_STATES, likePattern, type RunListReads } from '../run-list';
import { listed, parseMeta } from '../sqlite/run-list';
import { toRun } from '../sqlite/rows';
import { query } from './open';

/** The runs page's reads (see the SQLite twin). */
export function postgresRunList(pool: pg.Pool): RunListReads {
  return {
    async countRunsByState() {
      return Object.fromEntries((await query<{ state: string; n: number }>(pool, 'SELECT state, COUNT(*) AS n FROM runs GROUP BY state')).map((r) => [r.state, Number(r.n)]));
    },
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
      // Containment: the session's tags hold every asked one.
      if (q.tags?.length) where.push(`COALESCE(s.meta_json::jsonb -> 'tags', '[]'::jsonb) @> ${arg(JSON.stringify(q.tags))}::jsonb`);
      const base = 'FROM runs r JOIN sessions s ON s.id = r.session_id';
      const countSql = `SELECT COUNT(*)::bigint AS n ${base}${where.length ? ` WHERE ${where.join(' AND ')}` : ''}`;
      const countArgs = [...args];
      const first = FIRST_STATES.map((s) => `'${s}'`).join(',');
      let order = `CASE WHEN r.state IN (${first}) THEN 0 ELSE 1 END, r.created_at DESC, r.id DESC`;
      if (q.order === 'created') {
        order = 'r.created_at, r.id';
        if (q.after) where.push(`(r.created_at > ${arg(q.after.createdAt)} OR (r.created_at = ${arg(q.after.createdAt)} AND r.id > ${arg(q.after.id)}))`);
      }
      const rows = await query(pool, `SELECT r.*, s.meta_json AS session_meta ${base}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ${arg(Math.floor(q.limit))} OFFSET ${arg(Math.floor(q.offset ?? 0))}`, args);
      const total = q.count === false ? -1 : Number((await query<{ n: number }>(pool, countSql, countArgs))[0]?.n ?? 0);
      return { runs: rows.map((r) => ({ ...toRun(r), ...listed(parseMeta(r.session_meta)) })), total };
    },
  };
}
