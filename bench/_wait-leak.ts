/** Heap kept by N waits on one kernel (each with its own caller signal, as `berth mcp` makes per call). */
import { mkdtempSync } from 'node:fs';
import { getEventListeners } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { DocumentTypes, Kernel, submit } from '../host/kernel';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { stepperRegistry } from '../test/support/stepper-kind';

const n = Number(process.argv[2] ?? 2000);
const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'wl-')), 'k.db'));
const registry = stepperRegistry(1);
const kernel = new Kernel({ store, registry, documents: new DocumentTypes(), clock: systemClock, logger: pino({ level: 'silent' }), hostId: 'bench', pollMs: 60_000 });
await kernel.start();
const gc = (globalThis as { gc?: () => void }).gc!;
async function batch(from: number, count: number, withSignal: boolean) {
  for (let i = from; i < from + count; i++) {
    const { run } = await submit({ store, kernel, registry }, { requestId: `r${i}`, runKind: 'bench', root: { kind: 'stepper', input: {} } });
    await kernel.waitForRun(run.id, withSignal ? { signal: new AbortController().signal } : {});
    await kernel.release(run.sessionId);
  }
}
await batch(0, 200, true);
gc();
const h0 = process.memoryUsage().heapUsed;
await batch(1000, n, process.argv[3] !== 'nosignal');
gc();
console.log(kernel.held());
console.log(`${n} waits: heap +${((process.memoryUsage().heapUsed - h0) / 1e6).toFixed(2)} MB; halted listeners ${getEventListeners((kernel as unknown as { halted: AbortController }).halted.signal, 'abort').length}`);
await kernel.stop();
await store.close();
