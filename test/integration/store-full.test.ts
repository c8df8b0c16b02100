import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { DocumentTypes, Kernel, submit } from '../../host/kernel';
import { openSqliteStore, type Store } from '../../host/store';
import { systemClock } from '../../host/support';
import { unrecordedSnapshotImages } from '../support/leak-check';
import { planFixture } from '../support/plan-fixture';
import { stepperRegistry } from '../support/stepper-kind';

let dir: string | undefined;
let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
  if (dir) {
    execFileSync('umount', [join(dir, 'disk')], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
  dir = undefined;
});

describe('a store on a disk that fills up', { timeout: 120_000 }, () => {
  it('retries a phase whose commit the full disk refused after a growing pause, not at once, and carries on once space is freed', async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-full-'));
    const disk = join(dir, 'disk');
    mkdirSync(disk);
    // A real full filesystem (the tests run as root, as dockerd and iptables need).
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', disk]);
    writeFileSync(join(disk, 'filler'), Buffer.alloc(600 << 10));
    const failures: number[] = [];
    const logger = pino(
      { level: 'error' },
      new Writable({
        write(chunk: Buffer, _e, done) {
          if (chunk.toString().includes('phase runner failed')) failures.push(Date.now());
          done();
        },
      }),
    );
    const store: Store = openSqliteStore(join(disk, 'berth.db'));
    const registry = stepperRegistry(1e9);
    const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger, hostId: `full-${process.pid}`, pollMs: 60_000 });
    stop = async () => {
      await kernel.stop();
      await store.close();
    };
    await kernel.start();
    const { run } = await submit({ store, kernel, registry }, { requestId: 'full', runKind: 'test', root: { kind: 'stepper', input: {} } });
    const step = async () => ((await store.getTask(run.rootTaskId!))!.checkpoint as { i?: number } | null)?.i ?? 0;

    for (let waited = 0; failures.length === 0; waited += 50) {
      if (waited > 15_000) throw new Error(`the disk never filled (step ${await step()})`);
      await sleep(50);
    }
    const full = await step();
    const since = failures[0]!;
    await sleep(2_000);
    const tries = failures.filter((t) => t - since <= 2_000).length;
    // Before: the task ran again as soon as its runner failed: thousands of tries (and error lines) a second.
    expect(tries).toBeGreaterThanOrEqual(1);
    expect(tries).toBeLessThanOrEqual(20);
    expect(await step()).toBe(full);

    rmSync(join(disk, 'filler'));
    for (let waited = 0; (await step()) <= full; waited += 100) {
      if (waited > 60_000) throw new Error(`no step committed after space was freed (still ${full})`);
      await sleep(100);
    }
  });

  it("berth run on a store whose disk fills names the store's refusal as the reason its lease ran out, not a paused process", async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-full-'));
    const disk = join(dir, 'disk');
    mkdirSync(disk);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', disk]);
    const fx = await planFixture([{ name: 'loud', run: 'i=0; while [ $i -lt 40000 ]; do echo line $i of output that fills the store; i=$((i+1)); done' }, { name: 'after', run: 'true' }], undefined, { store: join(disk, 'berth.db') });
    stop = () => fx.cleanup();
    fx.allowLeftovers("the full store refused a snapshot's record: an image no record names is gc's", unrecordedSnapshotImages);
    const r = await fx.cli(['run', fx.plan], { BERTH_LEASE_TTL_MS: '3000' });
    expect(r.code, r.stderr).toBe(4);
    // Before: "... ran out before a renewal reached the store (the process was paused or the store did not answer)".
    expect(r.stderr).toMatch(/ran out: its renewals failed \(SQLITE_FULL: database or disk is full\)/);
    expect(r.stderr).toContain('Once the store takes writes again, continue with: berth resume');
  });
});
