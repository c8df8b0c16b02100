import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small external service on loopback that counts calls per effect id, so a test can tell
 * whether an action was executed twice. `POST /act {effectId, fail}` answers 200 with a receipt,
 * or 500 when `fail` is set; `GET /counts` returns every count.
 */
export async function startEffectService(): Promise<{ url: string; counts(): Record<string, number>; close(): Promise<void> }> {
  const counts: Record<string, number> = {};
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/counts') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(counts));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/act') {
      res.statusCode = 404;
      res.end();
      return;
    }
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const { effectId, fail } = JSON.parse(body) as { effectId: string; fail?: boolean };
      counts[effectId] = (counts[effectId] ?? 0) + 1;
      res.statusCode = fail ? 500 : 200;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(fail ? { error: 'refused' } : { accepted: effectId }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => ({ ...counts }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
