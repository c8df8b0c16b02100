import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { newDockerClient } from '../../host/sandbox/docker-client';

describe('the Docker client', () => {
  it('still reaches an ssh:// engine through ssh2, which it loads only at that first connection', async () => {
    const client = newDockerClient({ protocol: 'ssh', host: '127.0.0.1', port: 1, username: 'berth' });
    // Nothing listens on port 1: ssh2's own connection attempt is what refuses (a stand-in left in its place would throw a TypeError instead).
    await expect(client.ping()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    const require = createRequire(import.meta.url);
    expect(Object.keys(require.cache).some((f) => f.includes('/node_modules/ssh2/'))).toBe(true);
  });
});
