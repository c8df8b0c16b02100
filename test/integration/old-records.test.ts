import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Violation } from '../../host/record';
import { bundleScript } from '../support/bundle-script';
import { runNode, type ChildEnd } from '../support/child';
import { deployPlan } from '../support/deploy-plan';
import { startEmailService } from '../support/email-service';
import { invariantGuard } from '../support/invariant-check';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { readStore } from '../support/temp-store';

/**
 * Issue 27, "Show it works": `berth check` fails on the lying records as the code the issue was
 * measured on wrote them (stores in test/fixtures/old-records, made by its generate.ts with that
 * code's CLI and notify program), and passes on the same routes run by today's code.
 */
const FIXTURES = join(process.cwd(), 'test', 'fixtures', 'old-records');
const BIN = join(process.cwd(), 'host', 'cli', 'bin.mjs');
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'berth-old-records-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

type CheckOut = { checked: number; ok: boolean; violations: Violation[] };
const check = async (store: string, env: Record<string, string> = {}): Promise<{ end: ChildEnd; out: CheckOut }> => {
  const end = await runNode(BIN, ['check', '--all', '--json', '--store', store], env, 120_000);
  return { end, out: JSON.parse(end.stdout) as CheckOut };
};
const schemaOf = (db: string) => {
  const d = new Database(db, { readonly: true });
  try {
    return (d.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number }).v;
  } finally {
    d.close();
  }
};
const ev = (v: Violation) => v.evidence as { effect?: string; next?: string; attempts?: number; recorded?: number };

/** A copy of one old store (the fixture itself stays as the old code left it). */
function copyOf(name: string): string {
  const db = join(tempDir(), name);
  copyFileSync(join(FIXTURES, name), db);
  return db;
}

describe('berth check on records the code before issue 27 wrote', () => {
  it('fails on a never step run twice after --reject-effect: the step\'s second generation attempts again an action whose "did not happen" has no attempt on record', async () => {
    const db = copyOf('reject-effect-twice.db');
    expect(schemaOf(db)).toBe(17);
    const { end, out } = await check(db);
    expect(end.code, end.stderr).toBe(1);
    expect(out.ok).toBe(false);
    // Today's code opened the old store by migrating it.
    expect(schemaOf(db)).toBeGreaterThan(17);
    const retry = out.violations.filter((v) => v.invariant === 'retry_same_effect');
    expect(retry).toHaveLength(1);
    expect(ev(retry[0]!).effect).toMatch(/:step:1:g0$/);
    expect(ev(retry[0]!).next).toMatch(/:step:1:g1$/);
    expect(ev(retry[0]!)).toMatchObject({ attempts: 1, recorded: 0 });
    const unproven = out.violations.filter((v) => v.invariant === 'settled_provenance').map((v) => ev(v).effect);
    expect(unproven.some((e) => e?.endsWith(':step:1:g0'))).toBe(true);
    // The deploy the operator said did not happen: failed on their word, its attempt not kept.
    const g0 = await readStore(db, async (s) => (await s.listEffects({})).find((e) => e.id.endsWith(':step:1:g0'))!);
    expect(g0).toMatchObject({ status: 'failed', attempts: 1, attemptLog: [], error: { code: 'operator_rejected' }, receipt: { type: 'operator-decision', decision: 'reject' } });
  }, 180_000);

  it('fails on an applied email recorded failed on the operator\'s word: the settlement names no attempt and no way it was learnt', async () => {
    const db = copyOf('email-failed-on-operator-word.db');
    expect(schemaOf(db)).toBe(17);
    const { end, out } = await check(db);
    expect(end.code, end.stderr).toBe(1);
    const failed = out.violations.filter((v) => v.invariant === 'settled_provenance' && ev(v).effect === 'email:notice-2026-10-1');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.message).toContain('is failed after 1 attempt(s), but its record holds 0 of them');
    const email = await readStore(db, (s) => s.getEffect('email:notice-2026-10-1'));
    expect(email).toMatchObject({ kind: 'email.send', status: 'failed', attempts: 1, attemptLog: [], receipt: { type: 'operator-decision', decision: 'reject' } });
  }, 180_000);
});

describe('berth check on the same routes run by today\'s code', () => {
  let fx: Awaited<ReturnType<typeof deployPlan>>['fx'] | undefined;
  let service: Awaited<ReturnType<typeof deployPlan>>['service'] | undefined;
  afterEach(async () => {
    await service?.close();
    service = undefined;
    await fx?.cleanup();
    fx = undefined;
  });

  it('passes on a never step the operator said did not happen and that ran again: the earlier generation keeps its attempt, settled by the operator who is named', async () => {
    ({ fx, service } = await deployPlan());
    fx.allowLeftovers('the kill before the deploy step\'s phase.complete leaves its snapshot image with no record; `berth gc` removes it after its grace period', unrecordedSnapshotImages);
    const first = await fx.cli(['run', fx.plan, '--json'], { BERTH_FAULT: 'before:phase.complete:plan-step#2' });
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = await fx.read(async (s) => (await s.listRuns())[0]!.id);
    expect((await fx.cli(['resume', runId, '--json'])).code).toBe(3);
    const done = await fx.cli(['reconcile', runId, '--reject-effect', '--json']);
    expect(done.code, done.stderr).toBe(0);
    expect(service.counts()).toEqual({ deploy: 2 });
    const g0 = await fx.read(async (s) => (await s.listEffects({ runId })).find((e) => e.id.endsWith(':step:1:g0'))!);
    expect(g0.attemptLog).toHaveLength(1);
    expect(g0.attemptLog[0]).toMatchObject({ id: `${g0.id}#1`, outcome: 'not_applied', settledBy: 'operator', actor: 'user:tester' });
    const { end, out } = await check(fx.store);
    expect(end.code, JSON.stringify(out.violations)).toBe(0);
    expect(out.ok).toBe(true);
  }, 300_000);

  it('passes on an uncertain email the operator says did not happen, from a CLI that loads the notify extension: the attempt names the operator', async () => {
    const svc = await startEmailService();
    const script = await bundleScript(join(process.cwd(), 'examples', 'notify', 'run-notify.ts'));
    try {
      const db = join(tempDir(), 'notify.db');
      const first = await runNode(script, [db, svc.url, '--concurrency', '1'], { BERTH_FAULT: 'before:phase.complete:send-notice#5' });
      expect(first.signal).toBe('SIGKILL');
      const inFlight = await readStore(db, async (s) => (await s.listEffects({})).find((e) => e.status === 'executing')!.id);
      await svc.down();
      const parked = await runNode(script, [db, svc.url, '--concurrency', '1']);
      const runId = (JSON.parse(parked.stdout.trim().split('\n').at(-1)!) as { runId: string; state: string }).runId;
      await svc.up();
      const rec = await runNode(BIN, ['--extension', join('examples', 'notify', 'extension.ts'), 'reconcile', runId, '--reject-effect', '--store', db, '--json'], { NOTIFY_SERVICE_URL: svc.url, BERTH_OPERATOR: 'tester' }, 120_000);
      // The notice ends failed, one email short (the operator said it was not sent), as the CLI says.
      expect(rec.code, rec.stderr).toBe(1);
      expect(rec.stderr).toContain('notice_incomplete');
      expect(await readStore(db, async (s) => (await s.getRun(runId))!.state)).toBe('failed');
      const email = await readStore(db, (s) => s.getEffect(inFlight));
      expect(email).toMatchObject({ status: 'failed', attempts: 1 });
      expect(email!.attemptLog.at(-1)).toMatchObject({ outcome: 'not_applied', settledBy: 'operator', actor: 'user:tester' });
      const { end, out } = await check(db);
      expect(end.code, JSON.stringify(out.violations)).toBe(0);
      const broken = await invariantGuard().check(db);
      expect(broken).toBeUndefined();
    } finally {
      rmSync(script, { force: true });
      await svc.close();
    }
  }, 300_000);
});
