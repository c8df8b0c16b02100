import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../host/errors';
import { ActionError, classifyFetchError, deliveryOf, httpAnswerError, notSent } from '../../host/kernel';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function serve(onRequest: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(onRequest);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

async function thrown(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('what a failed action proves about its delivery', () => {
  it('a refused connection never left: not_sent', async () => {
    const url = await serve(() => {});
    await new Promise((r) => servers.pop()!.close(r));
    const err = await thrown(fetch(`${url}/send`, { method: 'POST', body: 'x' }));
    expect(err).toBeInstanceOf(TypeError);
    expect(classifyFetchError(err)).toBe('not_sent');
    expect(deliveryOf(err)).toBe('not_sent');
  });

  it('a connection dropped after the service read the request may have been received: unknown, though fetch throws the same bare TypeError', async () => {
    const url = await serve((req) => req.on('data', () => {}).on('end', () => req.socket.destroy()));
    const err = await thrown(fetch(`${url}/send`, { method: 'POST', body: 'x' }));
    expect(err).toBeInstanceOf(TypeError);
    expect((err as Error).message).toBe('fetch failed');
    expect(classifyFetchError(err)).toBe('unknown');
  });

  it('an abort after the request was written is unknown; so is any error that says nothing', async () => {
    const url = await serve(() => {});
    const c = new AbortController();
    const p = thrown(fetch(`${url}/send`, { method: 'POST', body: 'x', signal: c.signal }));
    setTimeout(() => c.abort(), 100);
    expect(deliveryOf(await p)).toBe('unknown');
    expect(deliveryOf(new Error('boom'))).toBe('unknown');
    expect(deliveryOf(new BerthError('engine_error', 'gone', { retryable: true }))).toBe('unknown');
  });

  it('an answer refusing the request is rejected (503 and 429 retryable), another 5xx is unknown, and typed errors keep what they state', () => {
    expect(httpAnswerError(400, 'send')).toMatchObject({ delivery: 'rejected', retryable: false });
    expect(httpAnswerError(503, 'send')).toMatchObject({ delivery: 'rejected', retryable: true });
    expect(httpAnswerError(429, 'send')).toMatchObject({ delivery: 'rejected', retryable: true });
    expect(httpAnswerError(502, 'send').delivery).toBe('unknown');
    expect(deliveryOf(notSent('no route'))).toBe('not_sent');
    expect(notSent('no route')).toBeInstanceOf(ActionError);
  });
});
