/**
 * A host process that leases one sandbox, prints the lease as a JSON line and then waits to be
 * SIGKILLed: what a crashed host leaves behind, for the sweeper tests.
 *
 * usage: tsx test/support/sandbox-crash-child.ts STORE_PATH HOST_ID IMAGE_ID TTL_S
 */
import Dockerode from 'dockerode';
import pino from 'pino';
import { createSandboxHost } from '../../host/sandbox';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support/clock';
import { tinySpec } from './sandbox-spec';

const [storePath, hostId, imageId, ttl] = process.argv.slice(2);
if (!storePath || !hostId || !imageId || !ttl) {
  console.error('usage: sandbox-crash-child STORE_PATH HOST_ID IMAGE_ID TTL_S');
  process.exit(2);
}
const store = openSqliteStore(storePath);
const host = createSandboxHost({ docker: new Dockerode(), records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
const lease = await host.lease(tinySpec(imageId, { lease: { ttlS: Number(ttl), heartbeatS: 3600 } }), { sessionId: 'sess_crash', autoHeartbeat: false });
process.stdout.write(`${JSON.stringify(lease.record)}\n`);
setInterval(() => undefined, 1 << 30);
