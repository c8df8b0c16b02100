import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { DocumentTypes, HandlerRegistry, Kernel } from '../../host/kernel';
import { RunRecordSchema } from '../../host/record';
import { openSqliteStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { startEmailService } from '../support/email-service';

let script: string;
let dir: string;
beforeAll(async () => {
  script = await bundleScript(join(process.cwd(), 'examples', 'notify', 'run-notify.ts'));
  dir = mkdtempSync(join(tmpdir(), 'berth-record-notify-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
});

const cli = (db: string, args: string[]) => runNode(join(process.cwd(), 'host', 'cli', 'bin.mjs'), [...args, '--store', db]);

describe('the run record of a five-email run left in needs_reconciliation', () => {
  it('says from the exported file alone which email is uncertain and how to settle it, which four were sent with receipts, and that the run went through retry_wait; berth check passes', async () => {
    const svc = await startEmailService();
    try {
      const db = join(dir, 'notify.db');
      // One email at a time; the host dies with the fifth accepted by the service and its receipt unrecorded.
      const first = await runNode(script, [db, svc.url, '--concurrency', '1'], { BERTH_FAULT: 'before:phase.complete:send-notice#5' });
      expect(first.signal).toBe('SIGKILL');
      await svc.down();
      const second = await runNode(script, [db, svc.url, '--concurrency', '1']);
      const runId = (JSON.parse(second.stdout.trim().split('\n').at(-1)!) as { runId: string; state: string }).runId;
      const file = join(dir, 'record.json');
      const ex = await cli(db, ['export', runId, '--out', file]);
      expect(ex.code, ex.stderr).toBe(0);

      // From here on only the file is read.
      const r = RunRecordSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
      expect(r.run.state).toBe('needs_reconciliation');
      const uncertain = r.unresolved.filter((u) => u.kind === 'effect');
      expect(uncertain).toHaveLength(1);
      const effect = r.effects.find((e) => e.id === uncertain[0]!.id)!;
      expect(effect).toMatchObject({ status: 'unknown', replay: 'verify', reconciliation: 'verify_query' });
      expect(effect.intent).toMatchObject({ operationId: expect.stringMatching(/^notice-2026-10-/) });
      const sent = r.effects.filter((e) => e.status === 'confirmed');
      expect(sent).toHaveLength(4);
      for (const e of sent) expect(e.receipt).toMatchObject({ messageId: expect.any(String) });
      expect(r.transitions.map((t) => `${t.from}->${t.to}`)).toContain('running->retry_wait');
      expect(r.transitions.at(-1)!.to).toBe('needs_reconciliation');
      expect(r.unresolved).toContainEqual(expect.objectContaining({ kind: 'run', status: 'needs_reconciliation' }));
      // The host that died left the in-flight send's owner: a task of this run.
      expect(r.tasks.map((t) => t.id)).toContain(effect.taskId);
      expect(r.recovery.restarts).toBeGreaterThanOrEqual(1);
      // Contract fields of an application kind: versions per transition with its task kinds, attempts per effect.
      const kinds = [...new Set(r.tasks.map((t) => t.kind))].sort();
      expect(r.contract!.transitionVersions.map((t) => t.n)).toEqual(r.transitions.map((t) => t.n));
      expect([...new Set(r.contract!.transitionVersions.at(-1)!.taskKinds.map((k) => k.kind))].sort()).toEqual(kinds);
      expect(r.contract!.retry.map((k) => k.kind).sort()).toEqual(kinds);
      expect(r.contract!.effectAttempts.find((a) => a.effectId === effect.id)!.attempts).toBe(effect.attempts);
      expect(r.contract!.dependencyFailure).toMatchObject({ recorded: false });

      const check = await cli(db, ['check', '--all', '--json']);
      expect(check.code, check.stdout + check.stderr).toBe(0);

      // Imported elsewhere it is a record, not work: a host started on that store leaves it as it is,
      // the store refuses any commit to it, and the CLI refuses to reconcile it.
      const other = join(dir, 'imported.db');
      expect((await cli(other, ['import', file])).code).toBe(0);
      const refused = await cli(other, ['reconcile', runId, '--accept']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('run_imported');
      const store = openSqliteStore(other);
      const before = await store.listTasks({ runId });
      expect(before.some((t) => t.status !== 'terminal')).toBe(true);
      const kernel = new Kernel({ store, registry: new HandlerRegistry(), documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'importer', pollMs: 20 });
      await kernel.start();
      await new Promise((res) => setTimeout(res, 300));
      await kernel.stop();
      expect(await store.listTasks({ runId })).toEqual(before);
      const commit = store.commit({ sessionId: r.run.sessionId, label: 'sneak', runTransitions: [{ runId, from: 'needs_reconciliation', to: 'reconciling', actor: 'x', reason: 'x' }] });
      await expect(commit).rejects.toMatchObject({ code: 'run_imported' });
      expect((await store.getRun(runId))!.state).toBe('needs_reconciliation');
      await store.close();
    } finally {
      await svc.close();
    }
  }, 120_000);
});

