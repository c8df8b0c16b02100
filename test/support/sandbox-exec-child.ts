/**
 * A host process that leases one sandbox, starts tagged commands in it, prints the lease as a JSON
 * line and waits to be SIGKILLed: a host that dies while its step runs (mode `running`: a kept
 * service, then a command that sleeps SLEEP_S seconds and writes /workspace/marker) or after its
 * step ended but before anything was recorded (mode `ended`: a command that exits 7).
 *
 * usage: tsx test/support/sandbox-exec-child.ts STORE_PATH HOST_ID IMAGE_ID MODE [SLEEP_S]
 */
import Dockerode from 'dockerode';
import pino from 'pino';
import { createSandboxHost } from '../../host/sandbox';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support/clock';
import { tinySpec } from './sandbox-spec';

const [storePath, hostId, imageId, mode, sleepS = '4'] = process.argv.slice(2);
if (!storePath || !hostId || !imageId || (mode !== 'running' && mode !== 'ended')) {
  console.error('usage: sandbox-exec-child STORE_PATH HOST_ID IMAGE_ID running|ended [SLEEP_S]');
  process.exit(2);
}
const store = openSqliteStore(storePath);
const host = createSandboxHost({ docker: new Dockerode(), records: store, clock: systemClock, logger: pino({ level: 'warn' }), hostId });
const lease = await host.lease(tinySpec(imageId), { sessionId: 'sess_exec_crash', autoHeartbeat: false });
const say = () => process.stdout.write(`${JSON.stringify(lease.record)}\n`);
if (mode === 'running') {
  const svc = await lease.exec(['sh', '-c', 'setsid sleep 606 </dev/null >/dev/null 2>&1 & echo service'], { keepProcesses: true, tag: 'svc:a1' });
  if (svc.exitCode !== 0) process.exit(3);
  void lease.exec(['sh', '-c', `echo started; sleep ${sleepS}; echo done > /workspace/marker`], {
    tag: 'task_run:a1',
    timeoutMs: 0,
    onOutput: (_s, chunk) => {
      if (chunk.toString().includes('started')) say();
    },
  });
} else {
  const r = await lease.exec(['sh', '-c', 'exit 7'], { tag: 'task_end:a1' });
  if (r.exitCode !== 7) process.exit(3);
  say();
}
setInterval(() => undefined, 1 << 30);
