/**
 * A party of bench/gateway.ts in its own process, where it runs in real use: `provider` (the
 * scripted OpenAI-compatible server, standing for a provider the host reaches over the network)
 * or `client` (the `openai` client, standing for a coding agent in the sandbox, which is a process
 * of its own). The gateway stays in the bench's process, as it runs in the host's. Talks to the
 * bench over the fork's IPC channel; not a suite.
 */
import OpenAI from 'openai';
import { startModelServer } from '../test/support/model-server';

const MODEL = 'scripted-small';
const role = process.argv[2];
const send = (m: unknown) => process.send!(m);

if (role === 'provider') {
  const server = await startModelServer(() => ({ content: 'hello from the provider' }));
  process.on('message', (m: { stop?: true }) => {
    if (m.stop) void server.close().then(() => process.exit(0));
  });
  send({ url: server.url });
} else if (role === 'client') {
  process.on('message', async (m: { targets: Array<{ url: string; key: string }>; rounds: number; perRound: number; warm: number }) => {
    const clients = m.targets.map((t) => new OpenAI({ baseURL: t.url, apiKey: t.key, maxRetries: 0 }));
    const messages = [{ role: 'user' as const, content: 'say hello' }];
    const one = async (c: OpenAI): Promise<number> => {
      const t0 = performance.now();
      const a = await c.chat.completions.create({ model: MODEL, messages });
      if (a.choices[0]?.message.content !== 'hello from the provider') throw new Error('bench: unexpected answer');
      return performance.now() - t0;
    };
    for (let i = 0; i < m.warm; i++) for (const c of clients) await one(c);
    // times[round][target][i]: the targets interleaved call by call, so each round sees one load.
    const times: number[][][] = [];
    for (let r = 0; r < m.rounds; r++) {
      const round = clients.map(() => [] as number[]);
      for (let i = 0; i < m.perRound; i++) for (const [k, c] of clients.entries()) round[k]!.push(await one(c));
      times.push(round);
    }
    send({ times });
    process.exit(0);
  });
  send({ ready: true });
}
