/** `BINS=a/host/cli/bin.mjs,b/host/cli/bin.mjs npx tsx bench/_status-owners.ts`: berth status --json of 1,000 runs on a throwaway PostgreSQL store, three times per build. */
import { execFileSync } from 'node:child_process';
import pino from 'pino';
import { DocumentTypes, Kernel, submit } from '../host/kernel';
import { openStore } from '../host/store';
import { systemClock } from '../host/support';
import { stepperRegistry } from '../test/support/stepper-kind';
import { startPostgres } from '../test/support/postgres';
const pg = await startPostgres();
try {
  const url = await pg.createStoreDatabase('status');
  const store = await openStore(url);
  const registry = stepperRegistry(1);
  const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'mk', pollMs: 60_000, concurrency: 20 });
  await kernel.start();
  for (let i = 0; i < 1000; i += 50) {
    const subs = await Promise.all(Array.from({ length: 50 }, (_, k) => submit({ store, kernel, registry }, { requestId: `r${i + k}`, runKind: 'bench', root: { kind: 'stepper', input: {} } })));
    await Promise.all(subs.map((s) => kernel.waitForRun(s.run.id)));
  }
  await kernel.stop();
  await store.close();
  for (const bin of (process.env.BINS ?? 'host/cli/bin.mjs').split(',')) {
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now();
      execFileSync(process.execPath, [bin, 'status', '--store', url, '--json'], { stdio: ['ignore', 'ignore', 'inherit'] });
      console.log(bin, ((performance.now() - t0) / 1000).toFixed(2), 's');
    }
  }
} finally {
  await pg.stop();
}
