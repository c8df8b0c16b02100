import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../host/store';

describe('egress audit records', () => {
  it('keeps every attempt with its decision and bytes, filtered by run or lease, oldest first', async () => {
    const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'berth-egress-')), 'b.db'));
    const base = { method: 'CONNECT', reason: 'api.example.com:443', bytesOut: 10, bytesIn: 20, count: 1 };
    await store.recordEgress({ ...base, at: 2, runId: 'run_a', leaseId: 'lease_1', target: 'api.example.com:443', decision: 'allow' });
    await store.recordEgress({ ...base, at: 1, runId: 'run_a', leaseId: 'lease_1', target: 'evil.test:443', decision: 'deny', reason: 'not in the allow list', bytesOut: 0, bytesIn: 0 });
    await store.recordEgress({ ...base, at: 3, runId: 'run_b', leaseId: 'lease_2', target: 'api.example.com:443', decision: 'allow' });
    expect((await store.listEgress({ runId: 'run_a' })).map((a) => [a.at, a.target, a.decision])).toEqual([
      [1, 'evil.test:443', 'deny'],
      [2, 'api.example.com:443', 'allow'],
    ]);
    expect(await store.listEgress({ leaseId: 'lease_2' })).toEqual([{ ...base, at: 3, runId: 'run_b', leaseId: 'lease_2', target: 'api.example.com:443', decision: 'allow', id: null, endedAt: null }]);
    expect(await store.listEgress()).toHaveLength(3);
    await store.close();
  });

  it('keeps an allowed request from its start, completes the same row at its end, and a start written after its end changes nothing', async () => {
    const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'berth-egress-')), 'b.db'));
    const start = { at: 5, runId: 'run_a', leaseId: 'lease_1', method: 'GET', target: 'api.example.com:80', decision: 'allow' as const, reason: 'api.example.com:80', bytesOut: 0, bytesIn: 0, count: 1, id: 'egr_1', endedAt: null };
    await store.recordEgress(start);
    expect(await store.listEgress({ runId: 'run_a' })).toEqual([start]);
    await store.recordEgress({ ...start, bytesOut: 7, bytesIn: 99, endedAt: 9 });
    await store.recordEgress(start);
    expect(await store.listEgress({ runId: 'run_a' })).toEqual([{ ...start, bytesOut: 7, bytesIn: 99, endedAt: 9 }]);
    await store.close();
  });
});
