/**
 * Writes one lease record and one cost sample synced with the next commit (as a warm pool lease
 * and a tool call's usage are), says so on stdout, and waits to be killed. Args: store path, id.
 */
import { openSqliteStore } from '../../host/store';

const [path, id] = process.argv.slice(2) as [string, string];
const store = openSqliteStore(path);
const now = Date.now();
await store.insertLease({ id, sessionId: 'sess_child', hostId: 'host_child', containerId: 'c'.repeat(64), imageDigest: `sha256:${'a'.repeat(64)}`, envFingerprint: `sha256:${'b'.repeat(64)}`, createdAt: now, expiresAt: now + 60_000, releasedAt: null, runId: null, epoch: null }, { sync: 'with-next-commit' });
await store.recordCost({ runId: `run_${id}`, at: now, key: id, meters: { 'exec.count': 1, 'cpu.usec': 42 } }, { sync: 'with-next-commit' });
console.log('inserted');
setInterval(() => undefined, 1000);
