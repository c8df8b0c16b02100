/**
 * The group-commit crash test's job, run as a child process:
 *   node shared-flush-job.mjs DB RUNS STEPS
 * One kernel drives RUNS runs at once on a SQLite store, each a task that steps STEPS times
 * (one commit per step, its count in the checkpoint). Their phases end in the same turns, so their
 * commits share flushes (host/store/sqlite/shared-sync.ts). The same request ids make a
 * restart continue the same runs. Prints one JSON line with the runs' states when all settled.
 */
import pino from 'pino';
import { openStore } from '../../host/store';
import { DocumentTypes, Kernel, submit } from '../../host/kernel';
import { stepperRegistry } from '../support/stepper-kind';
import { systemClock } from '../../host/support';

const [dbPath, runsArg, stepsArg] = process.argv.slice(2) as [string, string, string];
const RUNS = Number(runsArg);
const STEPS = Number(stepsArg);
const store = await openStore(dbPath);
const registry = stepperRegistry(STEPS);
// One host id for every restart (one machine's berth): a restart takes the dead process's sessions at once.
const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'group-crash-host', pollMs: 100, concurrency: RUNS });
await kernel.start();
const runs = [];
for (let k = 0; k < RUNS; k++) runs.push((await submit({ store, kernel, registry }, { requestId: `group-${k}`, runKind: 'group', root: { kind: 'stepper', input: {} } })).run);
const settled = await Promise.all(runs.map((r) => kernel.waitForRun(r.id)));
await kernel.stop();
await store.close();
console.log(JSON.stringify({ states: settled.map((r) => r.state) }));
