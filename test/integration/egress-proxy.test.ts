import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EgressProxy, type EgressAttempt } from '../../host/egress';

let target: Server;
let targetPort: number;
let proxy: EgressProxy;
let proxyPort: number;
let audit: EgressAttempt[];

/** What the store keeps: an allowed exchange's start is completed in place by its end (one row per id). */
const keep = (a: EgressAttempt) => {
  const i = a.id ? audit.findIndex((x) => x.id === a.id) : -1;
  if (i >= 0) audit[i] = a;
  else audit.push(a);
};

/** `overrides: true` names every pattern in `network.allowOverride`. */
async function startProxy(allow: string[], overrides: boolean | string[] = false) {
  proxy = new EgressProxy({
    allow,
    overrides: overrides === true ? allow : overrides === false ? [] : overrides,
    runId: 'run_t',
    leaseId: 'lease_t',
    record: keep,
    // Names resolve without real DNS: "allowed.test" is the loopback target, "rebind.test" too.
    resolve: async (h) => (h === 'allowed.test' || h === 'rebind.test' ? '127.0.0.1' : Promise.reject(new Error('nxdomain'))),
  });
  proxyPort = (await proxy.listen('127.0.0.1')).port;
}

beforeEach(async () => {
  audit = [];
  target = createServer((req, res) => res.end(`hello ${req.method} ${req.url} host=${req.headers.host}`));
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
  targetPort = (target.address() as AddressInfo).port;
});
afterEach(async () => {
  await proxy?.close();
  await new Promise((r) => target.close(r));
});

function viaProxy(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // As curl and wget do: Host names the target, not the proxy (node would name the proxy).
    const host = url.startsWith('http://') ? new URL(url).host : undefined;
    const req = request({ host: '127.0.0.1', port: proxyPort, path: url, headers: { ...(host ? { host } : {}), ...headers } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends raw bytes to the proxy and returns everything it answers until it closes or goes quiet. */
function raw(text: string, quietMs = 300): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(proxyPort, '127.0.0.1');
    let got = '';
    let timer = setTimeout(() => s.destroy(), quietMs * 4);
    s.on('data', (d) => {
      got += d;
      clearTimeout(timer);
      timer = setTimeout(() => s.destroy(), quietMs);
    });
    s.on('close', () => (clearTimeout(timer), resolve(got)));
    s.on('error', () => resolve(got));
    s.write(text);
  });
}

const settle = () => new Promise((r) => setTimeout(r, 100));

describe('egress proxy', () => {
  it('forwards plain HTTP to an allowed host:port and records the bytes', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    const r = await viaProxy(`http://allowed.test:${targetPort}/x?y=1`);
    expect(r).toEqual({ status: 200, body: `hello GET /x?y=1 host=allowed.test:${targetPort}` });
    await settle();
    expect(audit).toEqual([expect.objectContaining({ runId: 'run_t', leaseId: 'lease_t', method: 'GET', target: `allowed.test:${targetPort}`, decision: 'allow', reason: `allowed.test:${targetPort}` })]);
    expect(audit[0]!.bytesIn).toBeGreaterThan(0);
  });

  it('tunnels CONNECT to an allowed host:port', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    const got = await raw(`CONNECT allowed.test:${targetPort} HTTP/1.1\r\nHost: allowed.test:${targetPort}\r\n\r\nGET /t HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`);
    expect(got).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(got).toContain('hello GET /t');
    await settle();
    expect(audit).toEqual([expect.objectContaining({ method: 'CONNECT', decision: 'allow' })]);
    expect(audit[0]!.bytesOut).toBeGreaterThan(0);
    expect(audit[0]!.bytesIn).toBeGreaterThan(0);
  });

  it('denies a name that is not listed with 403 and records it', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    expect((await viaProxy(`http://denied.test:${targetPort}/`)).status).toBe(403);
    expect(await raw(`CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/);
    expect(audit.map((a) => [a.method, a.target, a.decision, a.reason])).toEqual([
      ['GET', `denied.test:${targetPort}`, 'deny', 'not in the allow list'],
      ['CONNECT', 'denied.test:443', 'deny', 'not in the allow list'],
    ]);
  });

  it('refuses an allowed port on another port, an unlisted IP literal and a wildcard for an address', async () => {
    await startProxy([`allowed.test:${targetPort}`, `*.test:${targetPort}`], true);
    expect((await viaProxy(`http://allowed.test:${targetPort + 1}/`)).status).toBe(403);
    expect((await viaProxy(`http://127.0.0.1:${targetPort}/`)).status).toBe(403);
    expect(audit.map((a) => a.reason)).toEqual(['not in the allow list', 'IP literal not in the allow list']);
  });

  it('refuses CONNECT with a Host header that names another host, and CONNECT in absolute form', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    expect(await raw(`CONNECT allowed.test:${targetPort} HTTP/1.1\r\nHost: evil.test:${targetPort}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/);
    expect(await raw(`CONNECT http://evil.test:${targetPort}/ HTTP/1.1\r\nHost: evil.test:${targetPort}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400/);
    expect((await viaProxy(`http://allowed.test:${targetPort}/`, { host: 'evil.test' })).status).toBe(403);
    expect(audit.map((a) => [a.method, a.decision, a.reason])).toEqual([
      ['CONNECT', 'deny', `Host header "evil.test:${targetPort}" does not match the target`],
      ['CONNECT', 'deny', 'CONNECT target is not host:port'],
      ['GET', 'deny', 'Host header "evil.test" does not match the target'],
    ]);
  });

  it('refuses a listed name that resolves to a private address unless the override allows it', async () => {
    await startProxy([`rebind.test:${targetPort}`], false);
    const r = await viaProxy(`http://rebind.test:${targetPort}/`);
    expect(r.status).toBe(403);
    expect(audit[0]!.reason).toBe(`rebind.test resolves to this host's address 127.0.0.1 and rebind.test:${targetPort} is not in network.allowOverride`);
  });

  it('refuses a private target at connect time unless its own pattern is named: an override of another pattern does not cover it', async () => {
    await startProxy([`rebind.test:${targetPort}`, `127.0.0.1:${targetPort}`], [`127.0.0.1:${targetPort}`]);
    expect((await viaProxy(`http://rebind.test:${targetPort}/`)).status).toBe(403);
    expect(await viaProxy(`http://127.0.0.1:${targetPort}/named`)).toMatchObject({ status: 200, body: expect.stringContaining('hello GET /named') });
    await settle();
    expect(audit.map((a) => [a.target, a.decision, a.reason])).toEqual([
      [`rebind.test:${targetPort}`, 'deny', `rebind.test resolves to this host's address 127.0.0.1 and rebind.test:${targetPort} is not in network.allowOverride`],
      [`127.0.0.1:${targetPort}`, 'allow', `127.0.0.1:${targetPort}`],
    ]);
  });

  it("refuses a listed address of this host or a private range when its pattern is not named, and a name resolving to this host's address", async () => {
    proxy = new EgressProxy({
      allow: [`127.0.0.1:${targetPort}`, `me.test:${targetPort}`],
      overrides: [],
      hostAddresses: ['127.0.0.1', '203.0.113.9'],
      runId: null,
      leaseId: null,
      record: keep,
      resolve: async () => '203.0.113.9',
    });
    proxyPort = (await proxy.listen('127.0.0.1')).port;
    expect((await viaProxy(`http://127.0.0.1:${targetPort}/`)).status).toBe(403);
    expect((await viaProxy(`http://me.test:${targetPort}/`)).status).toBe(403);
    expect(audit.map((a) => a.reason)).toEqual([
      `127.0.0.1 is this host's address 127.0.0.1 and 127.0.0.1:${targetPort} is not in network.allowOverride`,
      `me.test resolves to this host's address 203.0.113.9 and me.test:${targetPort} is not in network.allowOverride`,
    ]);
  });

  it('serves only its peer: a connection from any other address is closed and recorded', async () => {
    proxy = new EgressProxy({ allow: [`allowed.test:${targetPort}`], overrides: [], peer: '10.99.0.2', runId: 'run_t', leaseId: 'lease_t', record: keep, resolve: async () => '93.184.216.34' });
    proxyPort = (await proxy.listen('127.0.0.1')).port;
    expect(await raw(`GET http://allowed.test:${targetPort}/ HTTP/1.1\r\nHost: allowed.test:${targetPort}\r\n\r\n`)).toBe('');
    expect(audit).toEqual([expect.objectContaining({ method: 'TCP', target: `127.0.0.1:${proxyPort}`, decision: 'deny', reason: "connection to the egress proxy from 127.0.0.1 refused: only this sandbox's container (10.99.0.2) may use it", count: 1 })]);
  });

  it('refuses requests it cannot parse safely, smuggling attempts and oversized headers, and records each with its reason', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    const url = `http://allowed.test:${targetPort}`;
    const answers = [
      await raw(`POST ${url}/cl-te HTTP/1.1\r\nHost: allowed.test:${targetPort}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n`),
      await raw(`POST ${url}/cl-cl HTTP/1.1\r\nHost: allowed.test:${targetPort}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`),
      await raw(`GET ${url}/big HTTP/1.1\r\nHost: allowed.test:${targetPort}\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`),
    ];
    expect(answers.map((a) => a.split('\r\n')[0])).toEqual(['HTTP/1.1 400 Bad Request', 'HTTP/1.1 400 Bad Request', 'HTTP/1.1 431 Request Header Fields Too Large']);
    await settle();
    expect(audit.map((a) => [a.method, a.target, a.decision, a.reason])).toEqual([
      ['POST', `${url}/cl-te`, 'deny', "request refused while parsing: HPE_INVALID_TRANSFER_ENCODING (Transfer-Encoding can't be present with Content-Length)"],
      ['POST', `${url}/cl-cl`, 'deny', 'request refused while parsing: HPE_UNEXPECTED_CONTENT_LENGTH (Duplicate Content-Length)'],
      ['GET', `${url}/big`, 'deny', 'request refused while parsing: HPE_HEADER_OVERFLOW (headers larger than 16384 bytes)'],
    ]);
    // Nothing reached the target: no request was forwarded, smuggled or not.
    expect(audit.every((a) => a.bytesIn === 0)).toBe(true);
  });

  it('refuses an origin-form request: it is not a proxy request', async () => {
    await startProxy([`allowed.test:${targetPort}`], true);
    expect((await viaProxy('/', { host: `allowed.test:${targetPort}` })).status).toBe(400);
    expect(audit[0]).toMatchObject({ decision: 'deny', reason: 'not an absolute http:// proxy request' });
  });
});

describe('egress proxy connections to targets', () => {
  let echo: Server;
  let echoPort: number;
  let connections: number;
  beforeEach(async () => {
    connections = 0;
    echo = createServer((req, res) => res.end(JSON.stringify({ method: req.method, headers: req.headers })));
    echo.on('connection', () => (connections += 1));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    echoPort = (echo.address() as AddressInfo).port;
  });
  afterEach(async () => {
    echo.closeAllConnections();
    await new Promise((r) => echo.close(r));
  });

  it('keeps its connection to a target for the next GET, and still checks and records every request', async () => {
    await startProxy([`allowed.test:${echoPort}`], true);
    // Each request on a connection of its own from the sandbox, as wget makes them.
    for (let i = 0; i < 3; i++) expect((await viaProxy(`http://allowed.test:${echoPort}/${i}`, { connection: 'close' })).status).toBe(200);
    expect(connections).toBe(1);
    await settle();
    expect(audit.filter((a) => a.decision === 'allow' && a.endedAt !== null)).toHaveLength(3);
    // A request that may change something never goes over a kept connection (the target may have closed it).
    for (let i = 0; i < 2; i++) expect((await viaPostProxy(`http://allowed.test:${echoPort}/p`)).status).toBe(200);
    expect(connections).toBe(3);
  });

  it('passes on no hop-by-hop header: Connection and what it names, Keep-Alive, Proxy-Authorization', async () => {
    await startProxy([`allowed.test:${echoPort}`], true);
    const r = await viaProxy(`http://allowed.test:${echoPort}/h`, { connection: 'close, x-hop', 'x-hop': 'one link only', 'keep-alive': 'timeout=5', 'proxy-authorization': 'Basic c2VjcmV0', 'x-end': 'to the target' });
    const seen = (JSON.parse(r.body) as { headers: Record<string, string> }).headers;
    expect(seen['x-end']).toBe('to the target');
    expect(seen).not.toHaveProperty('x-hop');
    expect(seen).not.toHaveProperty('proxy-authorization');
    expect(seen['keep-alive']).toBeUndefined();
    // The proxy's own connection header, not the sandbox's.
    expect(seen.connection).toBe('keep-alive');
  });
});

function viaPostProxy(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: proxyPort, method: 'POST', path: url, headers: { host: new URL(url).host, connection: 'close', 'content-length': '2' } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end('{}');
  });
}
