import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Berth, BerthError } from '../../host/index';
import { openStore, type NewOutputChunk, type Store } from '../../host/store';
import { runNode } from '../support/child';
import { bundledCli } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';

// `/api/v1` lists are paged by cursor with a bounded page size, filtered by tag and creation date
// like the runs page and `berth status`, and the remote client reads every page transparently.
// A real store, a real `berth serve` child, the real CLI.

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
}, 120_000);

const DAY_MS = 86_400_000;
const day0 = Date.parse('2026-03-10T08:00:00Z');
const dayOf = (i: number) => Math.floor(i / 100);
const tagsOf = (i: number) => [...(i % 3 === 0 ? ['gpu'] : []), ...(i % 5 === 0 ? ['nightly'] : [])];
const runId = (i: number) => `run_${String(i).padStart(4, '0')}`;

/** 260 runs over three days (100, 100, 60), tagged by their number; entries and 1,200 output chunks on run 0. */
async function seed(path: string): Promise<Store> {
  let now = day0;
  const store = await openStore(path, { clock: { now: () => now } });
  for (let i = 0; i < 260; i++) {
    now = day0 + dayOf(i) * DAY_MS + (i % 100) * 1000;
    const tags = tagsOf(i);
    await store.commit({
      sessionId: `ses_${i}`,
      label: 'submit',
      createSession: { meta: { plan: 'p.yaml', name: `build-${i}`, ...(tags.length ? { tags } : {}) } },
      runs: [{ id: runId(i), kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }],
      runTransitions: [
        { runId: runId(i), from: 'admitted', to: 'running', actor: 'test', reason: 'seeded' },
        ...(i % 2 ? [] : [{ runId: runId(i), from: 'running' as const, to: 'completed' as const, actor: 'test', reason: 'seeded' }]),
      ],
      entries: i === 0 ? Array.from({ length: 45 }, (_, n) => ({ id: `ent_${n}`, runId: runId(0), kind: 'note', body: { n } })) : [],
    });
  }
  const chunks: NewOutputChunk[] = Array.from({ length: 1200 }, (_, n) => ({ runId: runId(0), source: 'step:0', label: 'build', attempt: 'att_1', n, channel: 'stdout', at: now, text: `line ${n}\n`, cutBytes: 0 }));
  for (let k = 0; k < chunks.length; k += 300) await store.appendOutput(chunks.slice(k, k + 300));
  return store;
}

const errorOf = async (p: Promise<unknown>) => p.then(() => { throw new Error('expected a refusal'); }, (err: unknown) => err);

describe('paged /api/v1 lists and the tag and date filters', { timeout: 300_000 }, () => {
  it('pages runs, a run\'s entries and its output by cursor in bounded pages, filters runs by tag and creation day in the API, the runs page and berth status, and refuses an oversized page', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-pages-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'berth.db');
    const store = await seed(path);
    cleanups.push(() => store.close());
    const server = await startServeChild(path, 'pages-test');
    cleanups.push(() => server.stop());
    const token = new URL(server.login!).searchParams.get('token')!;
    const remote = Berth.connect({ url: server.url, token });
    const auth = { authorization: `Bearer ${token}` };
    const get = async (p: string) => {
      const res = await fetch(`${server.url}${p}`, { headers: auth });
      return { status: res.status, body: (await res.json()) as { runs: Array<{ id: string; tags: string[] }>; nextCursor: string | null; error?: { code: string } } };
    };

    // Every run once, oldest first, read 7 at a time; a page holds at most what was asked.
    const all = Array.from({ length: 260 }, (_, i) => runId(i));
    expect((await remote.list({ pageSize: 7 })).map((r) => r.id)).toEqual(all);
    const first = await get('/api/v1/runs?limit=50');
    expect(first.body.runs.map((r) => r.id)).toEqual(all.slice(0, 50));
    expect(first.body.nextCursor).toEqual(expect.any(String));
    // A run added while a reader pages does not shift the pages: it comes last, and nothing twice.
    await store.commit({ sessionId: 'ses_new', label: 'submit', createSession: { meta: { name: 'late', tags: ['gpu'] } }, runs: [{ id: 'run_late', kind: 'plan', submissionId: null, rootTaskId: null, versions: {} }] });
    const rest: string[] = [];
    for (let cursor = first.body.nextCursor; cursor; ) {
      const page = await get(`/api/v1/runs?limit=100&cursor=${encodeURIComponent(cursor)}`);
      expect(page.body.runs.length).toBeLessThanOrEqual(100);
      rest.push(...page.body.runs.map((r) => r.id));
      cursor = page.body.nextCursor;
    }
    expect([...first.body.runs.map((r) => r.id), ...rest]).toEqual([...all, 'run_late']);
    expect((await get('/api/v1/runs?limit=500')).body.runs).toHaveLength(261);
    expect(await get('/api/v1/runs?limit=501')).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    expect(await get('/api/v1/runs?cursor=not-a-cursor')).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    // A misspelt state is refused, naming it (it was dropped, and every run listed).
    expect(await get('/api/v1/runs?state=completed&state=compleetd')).toMatchObject({ status: 400, body: { error: { code: 'invalid_request', message: expect.stringContaining('not compleetd') } } });
    // A body that is not JSON is said to be so (it was read as empty: "reason: expected string, received undefined").
    const notJson = await fetch(`${server.url}/api/v1/runs/${runId(0)}/reject`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"reason": "late' });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^request body is not JSON: /) });
    expect(await errorOf(remote.list({ from: 'yesterday' }))).toMatchObject({ code: 'invalid_request' });
    expect(await errorOf(remote.list({ pageSize: 1000 }))).toBeInstanceOf(BerthError);

    // Tags (every one asked) and creation days (inclusive), alone and together.
    const want = (keep: (i: number) => boolean) => Array.from({ length: 260 }, (_, i) => i).filter(keep).map(runId);
    expect((await remote.list({ tags: ['gpu'], pageSize: 20 })).map((r) => r.id)).toEqual([...want((i) => i % 3 === 0), 'run_late']);
    expect((await remote.list({ tags: ['gpu', 'nightly'] })).map((r) => r.id)).toEqual(want((i) => i % 15 === 0));
    expect((await remote.list({ from: '2026-03-11', to: '2026-03-11' })).map((r) => r.id)).toEqual(want((i) => dayOf(i) === 1));
    expect((await remote.list({ tags: ['nightly'], from: '2026-03-11', states: ['completed'] })).map((r) => r.id)).toEqual(want((i) => i % 5 === 0 && dayOf(i) >= 1 && i % 2 === 0));
    expect((await remote.list({ tags: ['gpu'], to: '2026-03-10' })).map((r) => [r.id, r.tags])).toEqual(want((i) => i % 3 === 0 && dayOf(i) === 0).map((id) => [id, tagsOf(Number(id.slice(4)))]));

    // The runs page: the filter is the URL, and the paging links keep it.
    const html = await (await fetch(`${server.url}/?tag=nightly&from=2026-03-10&to=2026-03-11`, { headers: auth })).text();
    const rows = [...html.matchAll(/data-run="([^"]+)"/g)].map((m) => m[1]);
    const expected = want((i) => i % 5 === 0 && dayOf(i) <= 1);
    expect(rows.sort()).toEqual(expected.slice().sort());
    expect(html).toContain('name="tag" value="nightly"');
    const gpuPage = await (await fetch(`${server.url}/?tag=gpu`, { headers: auth })).text();
    expect(gpuPage).toMatch(/id="next" href="\/\?tag=gpu&amp;page=2"/);
    expect(gpuPage).not.toContain('filter-ignored');
    // A misspelt state or an impossible day is named above the list, not dropped silently (the
    // page listed every run, as if they matched); what is valid still applies.
    const bad = await (await fetch(`${server.url}/?state=compleetd&state=completed&from=2026-02-30&to=2026-03-10`, { headers: auth })).text();
    expect(bad).toMatch(/id="filter-ignored"[^>]*>not applied: state &quot;compleetd&quot;: not a run state \(admitted, /);
    expect(bad).toContain('from &quot;2026-02-30&quot;: not a day (YYYY-MM-DD)');
    expect([...bad.matchAll(/data-run="([^"]+)"/g)].map((m) => m[1]).sort()).toEqual(want((i) => dayOf(i) === 0 && i % 2 === 0).sort());

    // berth status takes the same filter.
    const cli = await runNode(await bundledCli(), ['status', '--tags', 'gpu,nightly', '--from', '2026-03-11', '--to', '2026-03-12', '--json', '--store', path]);
    expect(cli.code, cli.stderr).toBe(0);
    expect((JSON.parse(cli.stdout) as { runs: Array<{ id: string }> }).runs.map((r) => r.id)).toEqual(want((i) => i % 15 === 0 && dayOf(i) >= 1));
    const refused = await runNode(await bundledCli(), ['status', '--state', 'sleepy', '--store', path]);
    expect(refused.code).not.toBe(0);
    // A day the calendar does not have is refused, by the API and by berth status as a usage error
    // naming its flag. Before: 2026-02-30 was read as March 2 (and a bad day was exit 1, "from must be").
    expect(await errorOf(remote.list({ from: '2026-02-30' }))).toMatchObject({ code: 'invalid_request', message: 'from must be a day (YYYY-MM-DD) or an ISO time, not 2026-02-30' });
    expect(await errorOf(remote.list({ to: '2026-02-29T10:00:00Z' }))).toMatchObject({ code: 'invalid_request' });
    for (const day of ['2026-02-30', '2026-13-01']) {
      const impossible = await runNode(await bundledCli(), ['status', '--from', day, '--store', path]);
      expect(impossible.code, impossible.stderr).toBe(2);
      expect(impossible.stderr.trim()).toBe(`berth: usage: --from must be a day (YYYY-MM-DD) or an ISO time, not ${day}`);
    }

    // A run's entries and its output, paged.
    const entries: number[] = [];
    for await (const e of remote.entries(runId(0), { pageSize: 10 })) entries.push((e.body as { n: number }).n);
    expect(entries).toEqual(Array.from({ length: 45 }, (_, n) => n));
    let text = '';
    let count = 0;
    for await (const c of remote.output(runId(0), { pageSize: 250 })) (text += c.text), count++;
    expect(count).toBe(1200);
    expect(text).toBe(Array.from({ length: 1200 }, (_, n) => `line ${n}\n`).join(''));
    const outPage = (await (await fetch(`${server.url}/api/v1/runs/${runId(0)}/output`, { headers: auth })).json()) as { chunks: unknown[]; nextCursor: string | null };
    expect(outPage.chunks).toHaveLength(100);
    expect(outPage.nextCursor).not.toBeNull();
  });
});
