import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseEnvironment } from '../../environment';
import { registryError } from '../../host/sandbox/registry';
import { SnapshotTransport } from '../../host/snapshot';
import { RegistryHttp } from '../../host/snapshot/registry/registry-http';
import { openSqliteStore } from '../../host/store';

const ENV = `kernel: { name: berth, version: 0.1.0, compatible: ">=0.1.0 <0.2.0" }\nimage: { ref: "berth/tiny:latest", digest: "sha256:${'a'.repeat(64)}" }\n`;

describe('registry-backed snapshots (pure logic)', () => {
  it('classifies registry failures: unreachable is retryable, a missing blob or a bad digest is not, and each names the registry', () => {
    const unreachable = registryError('pull x', '127.0.0.1:5000', 'Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused');
    expect(unreachable).toMatchObject({ code: 'registry_unreachable', retryable: true, details: { registry: '127.0.0.1:5000' } });
    expect(registryError('pull x', 'r:1', 'blob unknown: blob unknown to registry')).toMatchObject({ code: 'registry_missing', retryable: false });
    expect(registryError('pull x', 'r:1', 'manifest unknown: manifest unknown')).toMatchObject({ code: 'registry_missing', retryable: false });
    expect(registryError('pull x', 'r:1', 'filesystem layer verification failed for digest sha256:ab')).toMatchObject({ code: 'registry_digest_mismatch', retryable: false });
    expect(registryError('pull x', 'r:1', 'toomanyrequests').message).toContain('r:1');
  });

  it('takes the registry from the manifest before the host setting, and pushes sync unless the manifest says async', () => {
    const t = new SnapshotTransport({ registry: { push: async () => ({ ref: '', digest: '' }), pull: async () => 'present' }, store: undefined as never, logger: pino({ level: 'silent' }), hostRegistry: 'host.example:5000' });
    expect(t.target(parseEnvironment(ENV, 'e.yaml').snapshot)).toEqual({ registry: 'host.example:5000', policy: 'sync' });
    expect(t.target(parseEnvironment(`${ENV}snapshot: { registry: "reg.internal:443/team", push: async }\n`, 'e.yaml').snapshot)).toEqual({ registry: 'reg.internal:443/team', policy: 'async' });
    const none = new SnapshotTransport({ registry: { push: async () => ({ ref: '', digest: '' }), pull: async () => 'present' }, store: undefined as never, logger: pino({ level: 'silent' }) });
    expect(none.target(parseEnvironment(ENV, 'e.yaml').snapshot)).toBeUndefined();
  });

  it('offers a sync run\'s first snapshot an early layer upload on a loopback registry before any request (its scheme can only be plain HTTP), and not on another until a request found its scheme', () => {
    const registry = { push: async () => ({ ref: '', digest: '' }), pull: async () => 'present' as const, localImage: async () => undefined };
    const t = new SnapshotTransport({ registry, store: undefined as never, logger: pino({ level: 'silent' }) });
    for (const host of ['127.0.0.1:5000', 'localhost:5000', '[::1]:5000']) {
      expect(new RegistryHttp(host).settled).toBe(true);
      expect(t.earlyLayer({ registry: host, policy: 'sync' })).toBeDefined();
    }
    expect(new RegistryHttp('reg.internal:5000').settled).toBe(false);
    expect(t.earlyLayer({ registry: 'reg.internal:5000', policy: 'sync' })).toBeUndefined();
    expect(t.earlyLayer({ registry: '127.0.0.1:5000', policy: 'async' })).toBeUndefined();
  });

  it('refuses a registry with a scheme or credentials in the manifest', () => {
    expect(() => parseEnvironment(`${ENV}snapshot: { registry: "https://user:pw@reg:5000" }\n`, 'e.yaml')).toThrow(/registry/);
  });

  it('marks a committed snapshot pushed once (compare-and-set), and not a record that never committed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-unit-push-'));
    const store = openSqliteStore(join(dir, 'b.db'));
    try {
      await store.commit({ sessionId: 's1', label: 't', createSession: {}, snapshots: [{ id: 'snap_1', runId: null, taskId: null, leaseId: 'l', imageId: 'sha256:x', workspaceDigest: 'd', sizeBytes: 1, checkpoint: 'upload', parentId: null }] });
      expect((await store.getSnapshot('snap_1'))!.registryRef).toBeNull();
      expect(await store.markSnapshotPushed('snap_2', 'r/berth-snapshot@sha256:1', 5)).toBe(false);
      expect(await store.markSnapshotPushed('snap_1', 'r/berth-snapshot@sha256:1', 5)).toBe(true);
      expect(await store.markSnapshotPushed('snap_1', 'r/berth-snapshot@sha256:2', 6)).toBe(false);
      expect(await store.getSnapshot('snap_1')).toMatchObject({ registryRef: 'r/berth-snapshot@sha256:1', pushedAt: 5 });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
