import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Per-operation counters of the fake email service. */
export interface EmailCounts {
  /** Emails accepted (a repeat of an accepted operation id is not accepted again). */
  accepted: Record<string, number>;
  sendCalls: Record<string, number>;
  lookups: Record<string, number>;
}

/**
 * What the service does with the next send of one operation id: `drop` accepts it and then
 * closes the connection without answering; `hold` accepts it and never answers (until the
 * client gives up); `503` refuses it without accepting.
 */
export type SendFault = 'drop' | 'hold' | '503';

/**
 * A fake email service on loopback with the two properties the notify example needs:
 * `POST /send {operationId, to, subject, body}` accepts each operation id once (a repeat answers
 * the original message id), and `GET /operations/:id` finds an accepted operation (404 otherwise).
 * Faults a test can switch on: a fault per operation's next send, 503 for every lookup, and
 * `down()`/`up()`, which stop and restart listening on the same port (connections are refused
 * meanwhile).
 */
export async function startEmailService() {
  const counts: EmailCounts = { accepted: {}, sendCalls: {}, lookups: {} };
  const messages = new Map<string, { messageId: string; to: string }>();
  const faults = new Map<string, SendFault>();
  const held = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let lookupsFail = false;
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
        const fault = faults.get(m.operationId);
        faults.delete(m.operationId);
        if (fault === '503') return reply(503, { error: 'unavailable' });
        let known = messages.get(m.operationId);
        if (!known) {
          known = { messageId: `msg-${messages.size + 1}`, to: m.to };
          messages.set(m.operationId, known);
          bump(counts.accepted, m.operationId);
        }
        if (fault === 'drop') return req.socket.destroy();
        if (fault === 'hold') return void held.add(res);
        return reply(200, { messageId: known.messageId });
      }
      const lookup = /^\/operations\/(.+)$/.exec(req.url ?? '');
      if (req.method === 'GET' && lookup) {
        const id = decodeURIComponent(lookup[1]!);
        bump(counts.lookups, id);
        if (lookupsFail) return reply(503, { error: 'unavailable' });
        const known = messages.get(id);
        return known ? reply(200, { operationId: id, ...known }) : reply(404, { error: 'unknown operation' });
      }
      reply(404, { error: 'not found' });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const listen = (port: number) => new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const stop = () =>
    new Promise<void>((r) => {
      for (const res of held) res.destroy();
      held.clear();
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: (): EmailCounts => structuredClone(counts),
    /** The message id the service gave an accepted operation. */
    messageId: (operationId: string) => messages.get(operationId)?.messageId,
    fault: (operationId: string, f: SendFault) => void faults.set(operationId, f),
    failLookups: (on: boolean) => void (lookupsFail = on),
    /** Stops listening: every connection is closed and new ones are refused until `up()`. */
    down: stop,
    up: () => listen(port),
    close: () => (server.listening ? stop() : Promise.resolve()),
  };
}
