import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../host/store';
import { bundleScript } from '../support/bundle-script';
import { runNode, type ChildEnd } from '../support/child';
import { startEmailService } from '../support/email-service';
import { invariantGuard } from '../support/invariant-check';

// `berth reconcile --verify` of an application run (examples/notify) from the CLI: the verifier
// registered with the kind through the library API reaches the CLI by `--extension`.
let script: string;
const dirs: string[] = [];
const newDb = () => {
  const d = mkdtempSync(join(tmpdir(), 'berth-notify-cli-'));
  dirs.push(d);
  return join(d, 'notify.db');
};
let checked = 0;
afterEach(async () => {
  for (const d of dirs.slice(checked)) {
    const db = join(d, 'notify.db');
    if (!existsSync(db)) continue;
    const broken = await invariantGuard().check(db);
    if (broken) throw broken;
  }
  checked = dirs.length;
});
beforeAll(async () => {
  script = await bundleScript(join(process.cwd(), 'examples', 'notify', 'run-notify.ts'));
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
});

async function read<T>(db: string, f: (s: Store) => Promise<T>): Promise<T> {
  const s = await openStore(db);
  try {
    return await f(s);
  } finally {
    await s.close();
  }
}
const outOf = (end: ChildEnd) => JSON.parse(end.stdout.trim().split('\n').at(-1) || '{}') as { runId: string; state: string };
const cli = (db: string, args: string[], env: Record<string, string> = {}) => runNode(join(process.cwd(), 'host', 'cli', 'bin.mjs'), [...args, '--store', db, '--json'], env, 120_000);
const EXT = join('examples', 'notify', 'extension.ts');

/** A notice run parked in needs_reconciliation: email 5 accepted by the service, its receipt lost, the service down when looked up. */
async function parkedNotice(db: string, svc: Awaited<ReturnType<typeof startEmailService>>): Promise<{ runId: string; inFlight: string }> {
  const first = await runNode(script, [db, svc.url, '--concurrency', '1'], { BERTH_FAULT: 'before:phase.complete:send-notice#5' });
  expect(first.signal).toBe('SIGKILL');
  const inFlight = await read(db, async (s) => (await s.listEffects({})).find((e) => e.status === 'executing')!.id);
  await svc.down();
  const parked = outOf(await runNode(script, [db, svc.url, '--concurrency', '1']));
  expect(parked.state).toBe('needs_reconciliation');
  await svc.up();
  return { runId: parked.runId, inFlight };
}

describe('berth reconcile of an application run through the verifiers registered with its kind', () => {
  it('berth --extension MODULE reconcile RUN --verify settles an uncertain email by asking the service through the extension verifier, sends nothing again, and the run completes', async () => {
    const svc = await startEmailService();
    try {
      const db = newDb();
      const { runId, inFlight } = await parkedNotice(db, svc);
      const sends = svc.counts().sendCalls;
      const rec = await cli(db, ['--extension', EXT, 'reconcile', runId, '--verify'], { NOTIFY_SERVICE_URL: svc.url });
      expect(rec.code, rec.stderr).toBe(0);
      const after = await read(db, async (s) => ({ run: (await s.getRun(runId))!, effect: (await s.getEffect(inFlight))! }));
      expect(after.run.state).toBe('completed');
      expect(after.effect).toMatchObject({ status: 'confirmed', receipt: { messageId: svc.messageId(inFlight.replace('email:', '')) } });
      expect(svc.counts().sendCalls).toEqual(sends);
    } finally {
      await svc.close();
    }
  }, 240_000);

  it('the park reason of an uncertain email names only ways out that work: a host that loads the extension, and its choices', async () => {
    const svc = await startEmailService();
    try {
      const db = newDb();
      const { runId } = await parkedNotice(db, svc);
      const reason = await read(db, async (s) => (await s.listRunTransitions(runId)).at(-1)!.reason);
      expect(reason).toContain('--extension examples/notify/extension.ts reconcile RUN');
      expect(reason).toMatch(/--verify asks the service/);
      // Without the extension the CLI cannot run the kind: refused at once, saying how to load it.
      const bare = await cli(db, ['reconcile', runId, '--verify']);
      expect(bare.code).toBe(1);
      expect(bare.stderr).toContain('task_kind_unknown');
      expect(bare.stderr).toContain('--extension');
      expect(await read(db, async (s) => (await s.getRun(runId))!.state)).toBe('needs_reconciliation');
    } finally {
      await svc.close();
    }
  }, 240_000);

  it('berth reconcile --accept or --reject-effect of a parked run of an application kind this CLI cannot run is refused at once, naming the kind and how to load it, and changes nothing', async () => {
    const svc = await startEmailService();
    try {
      const db = newDb();
      const { runId } = await parkedNotice(db, svc);
      const moves = async () => read(db, async (s) => (await s.listRunTransitions(runId)).map((t) => `${t.from}->${t.to}`));
      const before = await moves();
      // Before: the CLI took the run into `reconciling` and waited silently on tasks it has no handler for.
      for (const choice of ['--accept', '--reject-effect']) {
        const bare = await cli(db, ['reconcile', runId, choice]);
        expect(bare.code, bare.stderr).toBe(1);
        expect(bare.stderr).toContain('task_kind_unknown');
        expect(bare.stderr).toMatch(/send-notice(s)?@1/);
        expect(bare.stderr).toContain('--extension');
        expect(await moves()).toEqual(before);
      }
      expect(await read(db, async (s) => (await s.listEffects({})).filter((e) => e.status === 'unknown').length)).toBe(1);
    } finally {
      await svc.close();
    }
  }, 240_000);
});
