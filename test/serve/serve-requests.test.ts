import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { planFixture } from '../support/plan-fixture';
import { startServeChild } from '../support/serve-browser';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((e) => console.error(e));
});

async function servedRun() {
  const fx = await planFixture([{ name: 'one', run: 'echo one' }]);
  cleanups.push(() => fx.cleanup());
  expect((await fx.cli(['run', fx.plan])).code).toBe(0);
  const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
  const server = await startServeChild(fx.store, fx.hostId, ['--no-token']);
  cleanups.push(() => server.stop());
  return { fx, runId, server };
}

interface Answer {
  status: number;
  body: string;
  /** Bytes of the body the client had written when the answer came. */
  written: number;
}

/**
 * A POST whose body is written in 64 KiB pieces until `bytes` or until the server answers,
 * whichever comes first: an answer to an oversized body must not wait for the whole of it.
 * With `declare`, the length is sent as content-length up front; without, the body is chunked.
 */
function post(url: string, o: { bytes: number; headers?: Record<string, string>; declare?: boolean; body?: string }): Promise<Answer> {
  const u = new URL(url);
  const piece = Buffer.alloc(64 * 1024, 'a');
  return new Promise((resolve, reject) => {
    let written = 0;
    let answered = false;
    const headers: Record<string, string | number> = { ...o.headers };
    if (o.body !== undefined) headers['content-length'] = Buffer.byteLength(o.body);
    else if (o.declare) headers['content-length'] = o.bytes;
    const req = request({ hostname: u.hostname, port: u.port, path: u.pathname + u.search, method: 'POST', headers }, (res) => {
      answered = true;
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body, written }));
    });
    // Once answered, the server may close the connection under the rest of the body: not an error of the test.
    req.on('error', (err) => (answered ? undefined : reject(err)));
    if (o.body !== undefined) return void req.end(o.body);
    const more = () => {
      while (!answered && written < o.bytes) {
        written += piece.length;
        if (!req.write(piece)) return void req.once('drain', more);
      }
      if (!answered) req.end();
    };
    more();
  });
}

const csrfOf = (page: string) => /name="_csrf" value="([0-9a-f]{64})"/.exec(page)?.[1];

describe('berth serve answers malformed and oversized requests with a typed refusal and keeps serving', { timeout: 300_000 }, () => {
  it('refuses a body over the limit with 413 before reading the rest of it (declared or chunked, API or form), and serves the next request', async () => {
    const { runId, server } = await servedRun();
    const huge = 64 * 1024 * 1024;
    const api = await post(`${server.url}/api/v1/runs`, { bytes: huge, declare: true, headers: { 'content-type': 'application/json' } });
    expect(api.status).toBe(413);
    expect(JSON.parse(api.body)).toMatchObject({ error: { code: 'request_too_large', retryable: false } });
    expect(JSON.parse(api.body).error.message).toContain('1048576 bytes');
    expect(api.written).toBeLessThan(huge);

    const chunked = await post(`${server.url}/api/v1/runs`, { bytes: huge, headers: { 'content-type': 'application/json' } });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body)).toMatchObject({ error: { code: 'request_too_large' } });
    expect(chunked.written).toBeLessThan(huge);

    const form = await post(`${server.url}/runs/${runId}/accept`, { bytes: huge, headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url } });
    expect(form.status).toBe(413);
    expect(form.body).toMatch(/^413: request body larger than 1048576 bytes/);
    expect(form.written).toBeLessThan(huge);

    expect((await fetch(`${server.url}/api/runs/${runId}`)).status).toBe(200);
    expect(server.output()).not.toContain('request failed');
  });

  it('refuses a POST whose Origin is not a URL as cross-site (403), not as an internal error, and records nothing', async () => {
    const { fx, runId, server } = await servedRun();
    const page = await (await fetch(`${server.url}/runs/${runId}`)).text();
    const csrf = csrfOf(page)!;
    expect(csrf).toBeDefined();
    for (const origin of ['garbage', 'http://', '://127.0.0.1']) {
      const r = await post(`${server.url}/runs/${runId}/accept`, { bytes: 0, body: `_csrf=${csrf}`, headers: { 'content-type': 'application/x-www-form-urlencoded', origin } });
      expect(r.status, origin).toBe(403);
      expect(r.body, origin).toContain('cross-site request refused');
    }
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toEqual([]);
    expect(server.output()).not.toContain('request failed');
  });

  it('answers a page number past every page (however many digits) with an empty page of the list, not a 500', async () => {
    const { runId, server } = await servedRun();
    for (const page of ['99999999999999999999', '9007199254740993', '1000000000000']) {
      const api = await fetch(`${server.url}/api/runs?page=${page}&limit=1000`);
      expect(api.status, page).toBe(200);
      expect(await api.json(), page).toEqual({ runs: [], total: 1 });
      const list = await fetch(`${server.url}/?page=${page}`);
      expect(list.status, page).toBe(200);
      expect(await list.text(), page).not.toContain(`data-run="${runId}"`);
    }
    expect(await (await fetch(`${server.url}/api/runs`)).json()).toMatchObject({ runs: [{ run: { id: runId } }], total: 1 });
    expect(server.output()).not.toContain('request failed');
  });

  it('answers an action on a run or an approval that does not exist with 404 naming it, not 409, and changes nothing', async () => {
    const { fx, runId, server } = await servedRun();
    const csrf = csrfOf(await (await fetch(`${server.url}/runs/${runId}`)).text())!;
    const act = (path: string, body = '') => post(`${server.url}${path}`, { bytes: 0, body, headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', 'x-csrf-token': csrf } });
    for (const [action, body] of [['cancel', ''], ['accept', ''], ['reconcile', 'answer=accept'], ['fork', 'at=upload']]) {
      const r = await act(`/runs/run_nope/${action}`, body);
      expect(r.status, action).toBe(404);
      expect(JSON.parse(r.body).said, action).toMatch(/^run_not_found: no run run_nope/);
    }
    const approval = await act(`/runs/${runId}/approve`, 'id=call_nope');
    expect(approval.status).toBe(404);
    expect(JSON.parse(approval.body).said).toMatch(/^approval_not_found: .*call_nope/);
    // A refusal of something that exists stays a conflict.
    expect((await act(`/runs/${runId}/cancel`)).status).toBe(409);
    expect(await fx.read((s) => s.listAcceptance({ runId }))).toEqual([]);
  });

  it('answers every error under /api in JSON with its code (a missing run, an unknown path, a method or a POST it does not take, a foreign Host, a missing token), while pages keep their text', async () => {
    const { fx, server } = await servedRun();
    const port = new URL(server.url).port;
    const json = async (r: Answer, code: string, status: number, what: string) => {
      expect(r.status, `${what}: ${r.body}`).toBe(status);
      let body: { error?: { code?: string; message?: string; retryable?: boolean } } = {};
      expect(() => (body = JSON.parse(r.body)), `${what}: ${r.body}`).not.toThrow();
      expect(body.error, what).toMatchObject({ code, retryable: false });
      expect(body.error!.message, what).toBeTruthy();
    };
    const ask = (path: string, o: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
      new Promise<Answer>((resolve, reject) => {
        const req = request({ hostname: '127.0.0.1', port, path, method: o.method ?? 'GET', headers: o.headers }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body, written: 0 }));
        });
        req.on('error', reject);
        req.end(o.body);
      });
    await json(await ask('/api/runs/run_nope'), 'run_not_found', 404, 'missing run');
    expect(JSON.parse((await ask('/api/runs/run_nope')).body).error.ids).toEqual({ runId: 'run_nope' });
    await json(await ask('/api/runs/run_nope/events'), 'run_not_found', 404, 'missing run events');
    await json(await ask('/api/nothing-here'), 'not_found', 404, 'unknown path');
    await json(await ask('/api/runs', { method: 'PUT' }), 'method_not_allowed', 405, 'PUT');
    await json(await ask('/api/runs', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=1' }), 'csrf_refused', 403, 'POST without CSRF');
    await json(await ask('/api/runs', { headers: { host: `evil.example:${port}` } }), 'host_refused', 421, 'foreign Host');
    // Pages keep their plain text.
    const page = await ask('/runs/run_nope');
    expect(page.status).toBe(404);
    expect(page.body).toMatch(/^run_not_found: /);

    const guarded = await startServeChild(fx.store, fx.hostId);
    cleanups.push(() => guarded.stop());
    const r = await fetch(`${guarded.url}/api/runs`);
    await json({ status: r.status, body: await r.text(), written: 0 }, 'unauthorized', 401, 'no token');
    expect(server.output()).not.toContain('request failed');
  });

  it('answers request headers over the limit (a 100 KB cookie, thousands of headers, a 100 KB URL) with 431 in JSON under /api and in text for a page, and serves the next request', async () => {
    const { server } = await servedRun();
    const port = Number(new URL(server.url).port);
    const host = `Host: 127.0.0.1:${port}\r\n`;
    const cookie = `Cookie: a=${'a'.repeat(100_000)}\r\n`;
    const many = Array.from({ length: 3000 }, (_, i) => `X-H${i}: v\r\n`).join('');
    const api = [`GET /api/runs HTTP/1.1\r\n${host}${cookie}\r\n`, `GET /api/v1/runs HTTP/1.1\r\n${host}${many}\r\n`, `GET /api/runs?q=${'a'.repeat(100_000)} HTTP/1.1\r\n${host}\r\n`];
    for (const head of api) {
      const r = await raw(port, head);
      expect(r.status, r.text.slice(0, 300)).toBe(431);
      expect(r.headers).toMatch(/content-type: application\/json/i);
      expect(JSON.parse(r.body).error).toMatchObject({ code: 'request_headers_too_large', retryable: false });
    }
    const page = await raw(port, `GET / HTTP/1.1\r\n${host}${cookie}\r\n`);
    expect(page.status).toBe(431);
    expect(page.body).toMatch(/^431: /);
    const next = await fetch(`${server.url}/api/runs`);
    expect(next.status).toBe(200);
  });
});

/** Writes `head` on a new connection and reads the answer until the server closes it. */
function raw(port: number, head: string): Promise<{ status: number; headers: string; body: string; text: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const done = () => {
      const [headers = '', body = ''] = text.split('\r\n\r\n', 2);
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(headers)?.[1] ?? 0), headers, body, text });
    };
    socket.setEncoding('utf8').on('data', (d: string) => (text += d));
    // The server may close while the rest of the request is still being written.
    socket.on('error', () => {});
    socket.on('close', done);
    socket.write(head);
  });
}

