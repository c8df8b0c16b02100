import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { csrfToken, escapeHtml, html, isLoopback, sessionCookie, sessionValue } from '../../host/serve';
import { requireCsrf, requireToken } from '../../host/serve/auth';
import { emptyCost } from '../../host/cost';
import { runFragment } from '../../host/serve/run-page';
import type { RunView } from '../../host/serve/run-view';
import { runsFragment } from '../../host/serve/runs-page';

describe('serve: HTML escaping and access checks', () => {
  it('escapes every interpolated value, in text and attributes, arrays included; only html`` output passes as markup', () => {
    const evil = `<script>alert(1)</script>" onmouseover="x' \``;
    const out = html`<p title="${evil}">${evil}${[evil, html`<b>ok</b>`]}</p>`.value;
    expect(out).not.toContain('<script>');
    expect(out).not.toContain('" onmouseover');
    expect(out).toContain('&lt;script&gt;alert(1)&lt;/script&gt;&quot; onmouseover=&quot;x&#39; &#96;');
    expect(out).toContain('<b>ok</b>');
    expect(escapeHtml('&amp;')).toBe('&amp;amp;');
  });

  it('tells loopback addresses from others', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '10.0.0.1', '::', '192.168.1.2', 'example.com']) expect(isLoopback(h), h).toBe(false);
  });

  it('asks for the token on every request and the CSRF token on every POST; refuses another origin and other methods', async () => {
    const token = 'a'.repeat(64);
    const app = new Hono();
    app.use('*', requireToken(token));
    app.use('*', requireCsrf(token));
    app.get('/x', (c) => c.text('read'));
    app.post('/x', (c) => c.text('changed'));
    app.delete('/x', (c) => c.text('deleted'));
    const auth = { authorization: `Bearer ${token}`, host: 'localhost' };
    expect((await app.request('/x')).status).toBe(401);
    expect((await app.request('/x', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await app.request('/x', { headers: auth })).status).toBe(200);
    // The cookie holds a value derived from the token, under a name of the port: the token itself is no cookie.
    expect((await app.request('/x', { headers: { cookie: `${sessionCookie('')}=${sessionValue(token)}` } })).status).toBe(200);
    expect((await app.request('/x', { headers: { cookie: `${sessionCookie('')}=${token}` } })).status).toBe(401);
    expect((await app.request('http://localhost:7777/x', { headers: { cookie: `${sessionCookie('')}=${sessionValue(token)}` } })).status).toBe(401);
    expect((await app.request('/x', { method: 'POST', headers: auth })).status).toBe(403);
    expect((await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': 'nope' } })).status).toBe(403);
    expect((await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': csrfToken(token), origin: 'http://evil.example' } })).status).toBe(403);
    expect((await app.request('/x', { method: 'DELETE', headers: { ...auth, 'x-csrf-token': csrfToken(token) } })).status).toBe(405);
    const ok = await app.request('/x', { method: 'POST', headers: { ...auth, 'x-csrf-token': csrfToken(token), origin: 'http://localhost' } });
    expect(await ok.text()).toBe('changed');
    const form = await app.request('/x', { method: 'POST', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${csrfToken(token)}` });
    expect(await form.text()).toBe('changed');
  });

  it('renders acceptance, cost, artifacts, lineage and the pushed column with every recorded value escaped; fork from here only on a kept plan checkpoint; Accept only on a completed run', () => {
    const evil = '<script>alert(1)</script>';
    const snap = (id: string, checkpoint: string, extra: object = {}) => ({ id, sessionId: 's', runId: 'run_a', taskId: null, leaseId: 'l', imageId: 'sha256:img', workspaceDigest: 'sha256:ws', sizeBytes: 1e6, checkpoint, parentId: null, commitSeq: 1, createdAt: 1, prunedAt: null, registryRef: null, pushedAt: null, ...extra });
    const view = (state: string) => ({
      run: { id: 'run_a', kind: 'plan', state, sessionId: 's', rootTaskId: 'root', createdAt: 1, updatedAt: 2 },
      owner: 'host h', approvals: [], entries: [], olderBefore: null, steps: [], tokens: null, commitSeq: 0,
      transitions: [], tasks: [], effects: [], leases: [], egress: { allowed: 0, denied: 0, dropped: [] },
      snapshots: [snap('snp_up', 'upload', { registryRef: `reg.example/x@sha256:${evil}`, pushedAt: 5 }), snap('snp_one', 'step:0:one'), snap('snp_gone', 'step:1:two', { prunedAt: 3 })],
      forkedFrom: { runId: 'run_p', snapshotId: 'snp_p', checkpoint: `step:0:${evil}`, index: 1 },
      forks: [{ runId: 'run_f', state: 'running' }],
      acceptance: { state: 'rejected', actor: 'user:ann', at: 10, reason: evil, evidence: { exitCode: 1, outputDigest: evil }, decisions: 1 },
      cost: { ...emptyCost(), tokens: { [evil]: { requests: 1, prompt: 2, completion: 3, cached: 0 } }, cpuSeconds: 1.5, execs: 2 },
      artifacts: [{ id: 'art_1', path: `out/${evil}.txt`, step: 'build', sizeBytes: 4, sha256: 'ab'.repeat(32), href: '/runs/run_a/artifacts/art_1' }],
    }) as unknown as RunView;
    const out = runFragment(view('completed'), 'csrf').value;
    expect(out).not.toContain('<script>');
    expect(out).toContain('reg.example/x@sha256:&lt;script&gt;');
    expect(out).toContain('acceptance: <strong>rejected</strong> by <span class="actor">user:ann</span>');
    expect(out).toContain('tokens &lt;script&gt;alert(1)&lt;/script&gt;');
    expect(out).toContain('1.500 s over 2 exec(s)');
    expect(out).toContain('out/&lt;script&gt;alert(1)&lt;/script&gt;.txt');
    expect(out).toContain('href="/runs/run_p"');
    expect(out).toContain('data-fork="run_f"');
    const forkForms = out.match(/name="at" value="[^"]+"/g);
    expect(forkForms).toEqual(['name="at" value="snp_up"', 'name="at" value="snp_one"']);
    expect(out).toContain('action="/runs/run_a/accept"');
    expect(runFragment(view('running'), 'csrf').value).not.toContain('/accept"');
  });

  it('escapes the new fields of the run page and list: run name, park reason, step names, live output of each attempt, receipt tables, the search box and the cut marker', () => {
    const evil = '<script>alert(1)</script>"\'`';
    const attempt = (state: 'running' | 'interrupted' | 'ended') => ({ attempt: `out_${state}`, source: 'step:0', label: evil, state, end: state === 'ended' ? evil : null, startedAt: 1, lastAt: 2, cutBytes: 5, parts: [{ channel: 'stdout', text: evil }, { channel: 'stderr', text: evil }, { channel: 'cut', text: evil }], lastSeq: 7 });
    const view = {
      run: { id: 'run_a', kind: 'plan', state: 'needs_reconciliation', sessionId: 's', rootTaskId: 'root', createdAt: 1, updatedAt: 2 },
      name: evil, parkReason: evil, output: [], outputSeq: 7,
      owner: 'host h', approvals: [], entries: [], olderBefore: null, tokens: null, commitSeq: 0,
      steps: [
        { taskId: 't', index: 0, name: evil, state: 'running', status: 'running (run)', startedAt: 1, attempts: [attempt('interrupted'), attempt('running')], exitCode: null, durationMs: 198.68643699999984, stdoutTail: '', stderrTail: '', snapshotId: null },
        { taskId: null, index: 1, name: `${evil}2`, state: 'pending', status: 'pending', startedAt: null, attempts: [], exitCode: null, durationMs: null, stdoutTail: '', stderrTail: '', snapshotId: null },
      ],
      transitions: [], tasks: [], leases: [], egress: { allowed: 0, denied: 0, dropped: [] }, snapshots: [], forkedFrom: null, forks: [],
      effects: [{ id: 'e1', kind: 'plan.step', replay: 'safe', status: 'confirmed', attempts: 1, receipt: { stdoutTail: `${evil}\nline`, [evil]: { nested: evil }, list: [evil], ms: 1.23456 } }],
      acceptance: { state: 'none', actor: null, at: null, reason: null, evidence: null, decisions: 0 },
      cost: emptyCost(), artifacts: [],
    } as unknown as RunView;
    const out = runFragment(view, 'csrf').value;
    expect(out).not.toMatch(/<script/i);
    expect(out).not.toContain(`"'\``);
    expect(out).toContain('<span id="run-name">&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;</span>');
    expect(out).toContain('id="park-reason"');
    expect(out).toContain('data-attempt-state="interrupted"');
    expect(out).toContain('data-attempt-state="running"');
    expect(out).toContain('data-state="pending"');
    expect(out).toContain('<table class="receipt">');
    expect(out).toContain('<th>&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;</th>');
    expect(out).toContain('1.235');
    expect(out).toContain('199 ms');
    expect(out).not.toContain('198.686');
    const list = runsFragment({ rows: [{ run: view.run as never, name: evil, tags: [evil], owner: evil, needsPerson: true, durationMs: 5, acceptance: { state: 'none' } as never, cost: emptyCost() }], total: 1 }, { states: [], search: evil, tags: [evil], from: evil, to: '', page: 1 }).value;
    expect(list).not.toMatch(/<script/i);
    expect(list).toContain('value="&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;"');
    expect(list).toContain('>&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;</a>');
    // A tag (run row and the filter box) is text too.
    expect(list).toContain('<span class="tag">&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;</span>');
    expect(list).toContain('name="tag" value="&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;"');
  });
});
