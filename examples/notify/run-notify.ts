/**
 * The five-email example as a program: sends one notice to every recipient through the email
 * service at SERVICE_URL, durably, and prints the summary as one JSON line.
 *
 *   npx tsx examples/notify/run-notify.ts STORE SERVICE_URL [--concurrency N] [--request-id ID]
 *   npx tsx examples/notify/run-notify.ts STORE SERVICE_URL --reconcile RUN (--verify | --accept)
 *
 * Run it again with the same store after a crash (or SIGKILL): the same request id continues the
 * same run, reusing committed receipts, confirming an email caught in flight by lookup and
 * sending only what the service never accepted. A run left in `needs_reconciliation` (an email that
 * may have been sent and could not be looked up) is settled with `--reconcile RUN --verify` (asks
 * the service once it is back) or `--accept` (the operator vouches for it); nothing is resent.
 */
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { hostname } from 'node:os';
import { createTaskHost, reconcileEffects, waitAfterReconcile } from '../../host/agent/custom-tasks';
import { openStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { httpEmailClient } from './email-client';
import { notifyExtension, SEND_NOTICES, type NoticeInput } from './notify-tasks';

const { values, positionals } = parseArgs({ allowPositionals: true, options: {
    concurrency: { type: 'string', default: '4' },
    'request-id': { type: 'string', default: 'notice-2026-10' },
    reconcile: { type: 'string' },
    verify: { type: 'boolean', default: false },
    accept: { type: 'boolean', default: false },
  },
});
const [storePath, serviceUrl] = positionals;
if (!storePath || !serviceUrl) {
  process.stderr.write('usage: run-notify STORE SERVICE_URL [--concurrency N] [--request-id ID]\n');
  process.exit(2);
}

const notice: NoticeInput = {
  noticeId: 'notice-2026-10',
  subject: 'Scheduled maintenance on October 12',
  body: 'Our service will be unavailable from 02:00 to 04:00 UTC on October 12.',
  recipients: ['customer-1@example.com', 'customer-2@example.com', 'customer-3@example.com', 'customer-4@example.com', 'customer-5@example.com'],
};

// A SQLite file path or a postgres:// URL.
const store = await openStore(storePath);
const host = createTaskHost({
  store,
  clock: systemClock,
  logger: pino({ level: process.env.BERTH_LOG_LEVEL ?? 'warn' }, pino.destination(2)),
  // The machine's id, as berth uses: a restart after a crash takes the dead process's sessions at
  // once (its pid is gone), where an id per process had to wait out the 30 s claim lease.
  hostId: process.env.BERTH_HOST_ID ?? hostname(),
  concurrency: Number(values.concurrency),
  extensions: [notifyExtension(httpEmailClient(serviceUrl))],
});
await host.kernel.start();
let settled;
if (values.reconcile) {
  if (values.verify === values.accept) throw new Error('--reconcile RUN needs exactly one of --verify, --accept');
  const actor = `user:${process.env.BERTH_OPERATOR ?? userInfo().username}`;
  const deps = { store, kernel: host.kernel, registry: host.registry, clock: systemClock };
  const r = await reconcileEffects(deps, values.reconcile, { action: values.verify ? 'verify' : 'accept', actor });
  for (const o of r.open) process.stderr.write(`still uncertain: ${o.effectId}: ${o.reason}\n`);
  settled = r.resumed ? await waitAfterReconcile(deps, values.reconcile) : (await store.getRun(values.reconcile))!;
} else {
  const { run } = await host.start({ kind: SEND_NOTICES, input: notice, requestId: values['request-id'] });
  settled = await host.kernel.waitForRun(run.id);
}
const run = settled;
const root = await store.getTask(run.rootTaskId!);
await host.kernel.stop();
await store.close();
process.stdout.write(`${JSON.stringify({ runId: run.id, state: settled.state, result: root?.result ?? null })}\n`);
process.exit(settled.state === 'completed' ? 0 : 1);
