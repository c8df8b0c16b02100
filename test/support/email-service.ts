import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Per-operation counters of the fake email service. */
export interface EmailCounts {
  /** Emails accepted (a repeat of an accepted operation id is not accepted again). */
  accepted: Record<string, number>;
  sendCalls: Record<string, number>;
  lookups: Record<string, number>;
}

/**
 * A fake email service on loopback with the two properties the notify example needs:
 * `POST /send {operationId, to, subject, body}` accepts each operation id once (a repeat answers
 * the original message id), and `GET /operations/:id` finds an accepted operation (404 otherwise).
 */
export async function startEmailService() {
  const counts: EmailCounts = { accepted: {}, sendCalls: {}, lookups: {} };
  const messages = new Map<string, { messageId: string; to: string }>();
  const bump = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const reply = (status: number, body: object) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'POST' && req.url === '/send') {
        const m = JSON.parse(raw) as { operationId: string; to: string };
        bump(counts.sendCalls, m.operationId);
        let known = messages.get(m.operationId);
        if (!known) {
          known = { messageId: `msg-${messages.size + 1}`, to: m.to };
          messages.set(m.operationId, known);
          bump(counts.accepted, m.operationId);
        }
        return reply(200, { messageId: known.messageId });
      }
      const lookup = /^\/operations\/(.+)$/.exec(req.url ?? '');
      if (req.method === 'GET' && lookup) {
        const id = decodeURIComponent(lookup[1]!);
        bump(counts.lookups, id);
        const known = messages.get(id);
        return known ? reply(200, { operationId: id, ...known }) : reply(404, { error: 'unknown operation' });
      }
      reply(404, { error: 'not found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: (): EmailCounts => structuredClone(counts),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
