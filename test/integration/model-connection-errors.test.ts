import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { openAiChatClient } from '../../host/agent/model';

/** A loopback port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const ask = (baseUrl: string) =>
  openAiChatClient({ baseUrl, apiKey: () => 'k' })
    .complete({ model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [], stream: false }, { signal: AbortSignal.timeout(20_000), timeoutMs: 20_000 })
    .then(
      () => undefined,
      (err: unknown) => err as Error & { code?: string },
    );

describe('a model endpoint the real openai client cannot reach', { timeout: 60_000 }, () => {
  it('is named with the transport\'s own reason, not only the client\'s "Connection error."', async () => {
    const port = await closedPort();
    const refused = await ask(`http://127.0.0.1:${port}/v1`);
    expect(refused?.code).toBe('model_connection');
    // Before: 'connection to the model endpoint failed: Connection error.'
    expect(refused?.message).toBe(`connection to the model endpoint http://127.0.0.1:${port}/v1 failed: Connection error. (ECONNREFUSED 127.0.0.1:${port})`);
    const unresolved = await ask('http://no-such-host.invalid/v1');
    expect(unresolved?.message).toMatch(/^connection to the model endpoint http:\/\/no-such-host\.invalid\/v1 failed: Connection error\. \((ENOTFOUND|EAI_AGAIN) no-such-host\.invalid\)$/);
    // Credentials in the URL never reach the message (it is recorded with the run).
    const withSecrets = await ask(`http://user:hunter2@127.0.0.1:${port}/v1?api-key=s3cret`);
    expect(withSecrets?.message).toContain(`endpoint http://127.0.0.1:${port}/v1 failed`);
    expect(withSecrets?.message).not.toMatch(/hunter2|s3cret/);
    // A port fetch refuses to use says so (it has no code of its own).
    expect((await ask('http://127.0.0.1:9/v1'))?.message).toContain('(bad port)');
  });
});
