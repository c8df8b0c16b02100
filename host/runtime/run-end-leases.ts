import type { Logger } from 'pino';
import type { Kernel } from '../kernel';
import { isFinalRunState } from '../model';
import type { SandboxHost, SweepRecord } from '../sandbox';
import type { Store } from '../store';
import { faultPoint } from '../support/faults';

/** What releasing the sandboxes of ended runs needs. */
export interface RunEndDeps {
  store: Pick<Store, 'getRun' | 'getImportedRun'>;
  sandbox: Pick<SandboxHost, 'releaseLeases'>;
  logger: Logger;
}

/**
 * Releases every unreleased lease of a run in a final state (completed, failed, cancelled,
 * compensated): the sandbox the run recorded, and any a killed host leased for it without
 * recording it on the run (leases are recorded as intents, with their run, before their container
 * exists). Leases of an agent session name the session, not a run, so a session keeps its sandbox
 * across runs. `runIds` limits the look to those runs. Returns what was removed.
 */
export async function releaseEndedRunLeases(d: RunEndDeps, runIds?: readonly string[]): Promise<SweepRecord[]> {
  const ended = new Map<string, Promise<boolean>>();
  const isEnded = (runId: string) => {
    let p = ended.get(runId);
    // An imported run's leases are another store's record: its containers are not this store's to remove.
    if (!p) ended.set(runId, (p = Promise.all([d.store.getRun(runId), d.store.getImportedRun(runId)]).then(([r, imported]) => r !== undefined && !imported && isFinalRunState(r.state))));
    return p;
  };
  return d.sandbox.releaseLeases(async (l) => {
    const release = l.runId !== null && (!runIds || runIds.includes(l.runId)) && (await isEnded(l.runId));
    if (release) faultPoint('run-end:release');
    return release;
  }, 'run_ended');
}

/**
 * Releases a run's leases as soon as a commit of this kernel moves it to a final state.
 * `settled()` waits for the releases started so far (the CLI awaits it before it exits).
 */
export function releaseLeasesOnRunEnd(kernel: Pick<Kernel, 'onCommit'>, d: RunEndDeps): { settled(): Promise<void> } {
  let chain: Promise<void> = Promise.resolve();
  kernel.onCommit((e) => {
    if (e.runIds.length === 0) return;
    const runIds = [...e.runIds];
    chain = chain
      .then(() => releaseEndedRunLeases(d, runIds))
      .then((removed) => {
        if (removed.length) d.logger.info({ runIds, removed: removed.length }, 'released the sandboxes of ended runs');
      })
      .catch((err: unknown) => d.logger.warn({ err, runIds }, 'could not release the sandboxes of an ended run; berth gc will'));
  });
  return { settled: () => chain };
}
