import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A loopback service that counts the requests it answered per path name (`/deploy` counts as
 * `deploy`), however the request reached it (directly or through the egress proxy, which sends
 * the absolute URL). A test asks it how often a side effect really happened.
 */
export async function startCountingService(): Promise<{ url: string; counts(): Record<string, number>; close(): Promise<void> }> {
  const counts: Record<string, number> = {};
  const server = createServer((req, res) => {
    const name = new URL(req.url ?? '/', 'http://x').pathname.slice(1);
    req.resume();
    req.on('end', () => {
      counts[name] = (counts[name] ?? 0) + 1;
      res.end(`accepted ${name}\n`);
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
