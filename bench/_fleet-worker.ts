/**
 * One worker process of the fleet bench: `node _fleet-worker.mjs STORE TTL_MS CONCURRENCY [HOST_ID]`, STORE
 * a SQLite path or a PostgreSQL URL, HOST_ID the machine it stands for (default `bench`). The same Worker and per-session Kernel as `berth worker`, with
 * the bench's kernel-only task kinds.
 */
import pino from 'pino';
import { Worker } from '../host/fleet';
import { DocumentTypes, HandlerRegistry, Kernel } from '../host/kernel';
import { openStore } from '../host/store';
import { systemClock } from '../host/support';
import { registerFleetKinds } from './_fleet-kinds';

const [location, ttlArg, concArg, hostArg] = process.argv.slice(2);
const hostId = hostArg ?? 'bench';
const ttl = Number(ttlArg);
const concurrency = Number(concArg);
const store = await openStore(location!);
const registry = new HandlerRegistry();
registerFleetKinds(registry);
const logger = pino({ level: 'silent' });
const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId, concurrency: concurrency * 2, pollMs: 100, heartbeatMs: Math.floor(ttl / 3), ownership: { leaseTtlMs: ttl } });
const worker = new Worker({ store, kernel, logger, hostId, pid: process.pid, concurrency, tags: [], leaseTtlMs: ttl, claimEveryMs: 50 });
process.once('SIGTERM', () => void worker.drain(0).then(() => store.close()).then(() => process.exit(0)));
await worker.start();
process.stdout.write('ready\n');
