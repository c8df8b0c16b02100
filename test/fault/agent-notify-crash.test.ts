import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EmailResult } from '../../examples/notify/notify-tasks';
import { runNode, type ChildEnd } from '../support/child';
import { startEmailService } from '../support/email-service';
import { notifyWorld, OPS, read } from '../support/notify-world';

const world = notifyWorld();
const { newDb } = world;

type NotifyOut = { runId: string; state: string; result: { sent: number; emails: EmailResult[] } | null };
const outOf = (end: ChildEnd): NotifyOut => JSON.parse(end.stdout.trim().split('\n').at(-1) || '{}') as NotifyOut;
const effectsOf = (db: string) =>
  read(db, async (s) => Object.fromEntries((await s.listEffects({})).map((e) => [e.id.replace('email:', ''), { status: e.status, receipt: e.receipt as Record<string, unknown>, runId: e.runId }])));
const movesOf = (db: string, runId: string) => read(db, async (s) => (await s.listRunTransitions(runId)).map((t) => `${t.from}->${t.to}`));
/**
 * Runs the five-email job with one send at a time and SIGKILLs it before the `nth` send's phase
 * commits (that email is accepted by the service, its receipt never recorded); returns its id.
 */
async function killedMidSend(db: string, url: string, nth: number): Promise<string> {
  const first = await world.run([db, url, '--concurrency', '1'], { BERTH_FAULT: `before:phase.complete:send-notice#${nth}` });
  expect(first.signal).toBe('SIGKILL');
  return Object.entries(await effectsOf(db)).find(([, e]) => e.status === 'executing')![0];
}
const cli = (db: string, args: string[]) => runNode(join(process.cwd(), 'host', 'cli', 'bin.mjs'), [...args, '--store', db, '--json']);

describe('five emails against a service that drops, refuses and goes down', () => {
  it('records an email whose connection dropped after the service accepted it as uncertain, confirms it by lookup instead of recording it failed, and completes with one acceptance per operation', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      svc.fault(OPS[2]!, 'drop');
      const end = await world.run([db, svc.url, '--concurrency', '1']);
      const out = outOf(end);
      expect(out.state, end.stderr).toBe('completed');
      const how = Object.fromEntries(out.result!.emails.map((e) => [e.operationId, e.how]));
      expect(how[OPS[2]!]).toBe('confirmed-by-lookup');
      expect(svc.counts().accepted).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
      expect(svc.counts().sendCalls[OPS[2]!]).toBe(1);
      const effects = await effectsOf(db);
      for (const op of OPS) expect(effects[op]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(op) } });
    } finally {
      await svc.close();
    }
  }, 60_000);

  it('waits out a refused connection in retry_wait with a budget, records the emails failed (never sent), and a new submission reusing the operation ids sends them afresh; a third reuses the receipts without resending', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      await svc.down();
      const first = outOf(await world.run([db, svc.url, '--request-id', 'first']));
      expect(first.state).toBe('failed');
      expect(await movesOf(db, first.runId)).toContain('running->retry_wait');
      const failed = await effectsOf(db);
      for (const op of OPS) expect(failed[op]?.status).toBe('failed');
      await svc.up();
      const second = outOf(await world.run([db, svc.url, '--request-id', 'second']));
      expect(second.state).toBe('completed');
      expect(second.result!.emails.map((e) => e.how)).toEqual(OPS.map(() => 'sent'));
      const third = outOf(await world.run([db, svc.url, '--request-id', 'third']));
      expect(third.state).toBe('completed');
      expect(third.result!.emails.map((e) => e.how)).toEqual(OPS.map(() => 'receipt-reused'));
      expect(svc.counts().accepted).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
      expect(svc.counts().sendCalls).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
      const effects = await effectsOf(db);
      for (const op of OPS) expect(effects[op]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(op) }, runId: second.runId });
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('with the service down during verification, backs off in retry_wait, then leaves the email unknown and the run needs_reconciliation; reconcile --verify settles it with the service receipt and the run completes', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      const inFlight = await killedMidSend(db, svc.url, 5);
      expect(Object.keys(svc.counts().accepted)).toHaveLength(5);
      await svc.down();
      const second = outOf(await world.run([db, svc.url, '--concurrency', '1']));
      expect(second.state).toBe('needs_reconciliation');
      const moves = await movesOf(db, second.runId);
      expect(moves).toContain('running->retry_wait');
      expect(moves.at(-1)).toBe('running->needs_reconciliation');
      const down = await effectsOf(db);
      // The service accepted it; the store says it may have happened (not failed, not still executing).
      expect(down[inFlight]?.status).toBe('unknown');
      for (const op of OPS.filter((o) => o !== inFlight)) expect(down[op]?.status).toBe('confirmed');
      await svc.up();
      const rec = await world.run([db, svc.url, '--reconcile', second.runId, '--verify']);
      expect(outOf(rec).state, rec.stderr).toBe('completed');
      const after = await effectsOf(db);
      for (const op of OPS) expect(after[op]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(op) } });
      expect(svc.counts().accepted).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
      expect(svc.counts().sendCalls[inFlight]).toBe(1);
      expect(svc.counts().sendCalls[OPS[4]!]).toBe(1);
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('a new submission reusing an operation id left unknown by another run reconciles it first: it takes the effect over, sends nothing, waits for reconciliation while the service is down, and settles it by lookup once it is back', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      const inFlight = await killedMidSend(db, svc.url, 5);
      await svc.down();
      const a = outOf(await world.run([db, svc.url, '--concurrency', '1']));
      expect(a.state).toBe('needs_reconciliation');
      const b = outOf(await world.run([db, svc.url, '--request-id', 'again']));
      expect(b.state).toBe('needs_reconciliation');
      // The new run owns the uncertain email now; the four confirmed ones stay with the run that sent them.
      const mid = await effectsOf(db);
      expect(mid[inFlight]).toMatchObject({ status: 'unknown', runId: b.runId });
      for (const op of OPS.filter((o) => o !== inFlight)) expect(mid[op]).toMatchObject({ status: 'confirmed', runId: a.runId });
      await svc.up();
      const recB = await world.run([db, svc.url, '--reconcile', b.runId, '--verify']);
      expect(outOf(recB).state, recB.stderr).toBe('completed');
      // The first run has nothing uncertain left: its own reconcile completes it too.
      const recA = await world.run([db, svc.url, '--reconcile', a.runId, '--verify']);
      expect(outOf(recA).state, recA.stderr).toBe('completed');
      expect((await effectsOf(db))[inFlight]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(inFlight) } });
      expect(svc.counts().accepted).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
      expect(svc.counts().sendCalls).toEqual(Object.fromEntries(OPS.map((o) => [o, 1])));
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('an operator --accept of an email that cannot be verified records a receipt typed as an operator decision, which the recipient plan accepts, and the run completes', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      const inFlight = await killedMidSend(db, svc.url, 5);
      svc.failLookups(true);
      const second = outOf(await world.run([db, svc.url, '--concurrency', '1']));
      expect(second.state).toBe('needs_reconciliation');
      expect((await effectsOf(db))[inFlight]?.status).toBe('unknown');
      const rec = await world.run([db, svc.url, '--reconcile', second.runId, '--accept'], { BERTH_OPERATOR: 'ops-1' });
      expect(outOf(rec).state, rec.stderr).toBe('completed');
      const after = await effectsOf(db);
      expect(after[inFlight]).toMatchObject({ status: 'confirmed', receipt: { type: 'operator-decision', decision: 'accept', by: 'user:ops-1' } });
      const plan = await read(db, async (s) => (await s.listDocuments({})).find((d) => d.type === 'notify.recipient-plan')!);
      expect(plan.ops.flatMap((o) => (o.op ? [(o.op as { receipt: { operationId: string } }).receipt.operationId] : [])).sort()).toEqual(OPS);
      expect(svc.counts().sendCalls[inFlight]).toBe(1);
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('berth resume of a run of an application task kind this CLI cannot run is refused at once, naming the kind and who can settle it, and changes nothing', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      await killedMidSend(db, svc.url, 3);
      const runId = await read(db, async (s) => (await s.listRuns())[0]!.id);
      const before = await movesOf(db, runId);
      const owner = () => read(db, async (s) => s.getSessionOwner((await s.getRun(runId))!.sessionId));
      const ownerBefore = await owner();
      // Before: the CLI claimed the run and waited forever on tasks it has no handler for.
      const resumed = await cli(db, ['resume', runId]);
      expect(resumed.code, resumed.stderr).toBe(1);
      expect(resumed.stderr).toContain('task_kind_unknown');
      expect(resumed.stderr).toMatch(/send-notice(s)?@1/);
      expect(await movesOf(db, runId)).toEqual(before);
      // The killed notify host's claim stands as it was: no new epoch, no new holder or pid.
      expect(ownerBefore?.pid).not.toBe(process.pid);
      expect(await owner()).toEqual(ownerBefore);
      // The program that registers the kind still carries it on.
      const out = outOf(await world.run([db, svc.url, '--concurrency', '1']));
      expect(out.state).toBe('completed');
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('a cancel committed while no host runs, with an accepted email in flight, tells the same story on resume: the email unknown, its task cancelled with its effect unknown, nothing sent after it; verified, the run ends cancelled', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      const inFlight = await killedMidSend(db, svc.url, 3);
      const runId = await read(db, async (s) => (await s.listRuns())[0]!.id);
      const cancel = await cli(db, ['cancel', runId]);
      expect(cancel.code, cancel.stderr).toBe(0);
      const out = outOf(await world.run([db, svc.url, '--concurrency', '1']));
      expect(out.state).toBe('needs_reconciliation');
      const effects = await effectsOf(db);
      expect(effects[inFlight]?.status).toBe('unknown');
      const recorded = Object.keys(effects).sort();
      expect(recorded).toHaveLength(3);
      expect(svc.counts().accepted).toEqual(Object.fromEntries(recorded.map((o) => [o, 1])));
      const task = await read(db, async (s) => (await s.listTasks({ runId })).find((t) => t.kind === 'send-notice' && (t.result as { cancelled?: { effect: string } } | null)?.cancelled?.effect === 'unknown'));
      expect(task?.outcome).toBe('cancelled');
      expect(task?.result).toEqual({ cancelled: { effect: 'unknown', effectIds: [`email:${inFlight}`] } });
      const rec = await world.run([db, svc.url, '--reconcile', runId, '--verify']);
      expect(outOf(rec).state, rec.stderr).toBe('cancelled');
      expect((await effectsOf(db))[inFlight]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(inFlight) } });
      expect(svc.counts().sendCalls[inFlight]).toBe(1);
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('cancel with email 3 in flight (accepted, no answer yet) records the email unknown and the task cancelled with its effect unknown, sends nothing after it, and once verified the run ends cancelled', async () => {
    const svc = await startEmailService();
    try {
      const { db } = newDb();
      svc.fault(OPS[2]!, 'hold');
      const running = world.run([db, svc.url, '--concurrency', '1']);
      while (!svc.counts().accepted[OPS[2]!]) await new Promise((r) => setTimeout(r, 50));
      const runId = await read(db, async (s) => (await s.listRuns())[0]!.id);
      const cancel = await cli(db, ['cancel', runId]);
      expect(cancel.code, cancel.stderr).toBe(0);
      const out = outOf(await running);
      expect(out.state).toBe('needs_reconciliation');
      const effects = await effectsOf(db);
      expect(effects[OPS[2]!]?.status).toBe('unknown');
      // Nothing was sent after the cancel: the service accepted exactly the emails the store has records of, once each.
      const recorded = Object.keys(effects).sort();
      expect(recorded).toContain(OPS[2]);
      for (const op of recorded.filter((o) => o !== OPS[2])) expect(effects[op]?.status).toBe('confirmed');
      expect(svc.counts().accepted).toEqual(Object.fromEntries(recorded.map((o) => [o, 1])));
      const task = await read(db, async (s) => (await s.listTasks({ runId })).find((t) => t.kind === 'send-notice' && t.outcome === 'cancelled' && (t.result as { cancelled?: { effect: string } } | null)?.cancelled?.effect === 'unknown'));
      expect(task?.result).toEqual({ cancelled: { effect: 'unknown', effectIds: [`email:${OPS[2]}`] } });
      // The run's root says where the whole notice stood: the emails its children sent and the one in flight.
      // Before: {"cancelled":{"effect":"before","effectIds":[]}} beside two sent emails.
      const root = await read(db, async (s) => s.getTask((await s.getRun(runId))!.rootTaskId!));
      expect(root?.outcome).toBe('cancelled');
      expect(root?.result).toEqual({ cancelled: { effect: 'unknown', effectIds: expect.arrayContaining(recorded.map((o) => `email:${o}`)) } });
      expect((root?.result as { cancelled: { effectIds: string[] } }).cancelled.effectIds).toHaveLength(recorded.length);
      const rec = await world.run([db, svc.url, '--reconcile', runId, '--verify']);
      expect(outOf(rec).state, rec.stderr).toBe('cancelled');
      expect((await effectsOf(db))[OPS[2]!]).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(OPS[2]!) } });
      expect(svc.counts().accepted).toEqual(Object.fromEntries(recorded.map((o) => [o, 1])));
    } finally {
      await svc.close();
    }
  }, 120_000);
});
