import { OPEN_RUN_STATES } from '../model';
import { registryAuth, type SandboxHost } from '../sandbox';
import { BASE_REPOSITORY, manifestPresent } from '../snapshot';
import type { Store } from '../store';

/** Whether a worker can start a session's run here, and if not, why (shown by `berth workers`). */
export type Placement = { ok: true } | { ok: false; runId: string | null; why: string };

type EnvLike = { image?: { ref?: string; digest?: string }; snapshot?: { registry?: string } };

// A "no" is asked again after this long: a base image being pushed, or loaded, appears meanwhile.
const RECHECK_MS = 5000;

/**
 * A worker claims only runs it can start on its engine: the run's base image is on the engine, or
 * in the registry the run's snapshots travel through (pulled and verified at lease), or the run
 * has a snapshot to restore from (on this engine, or pushed). Otherwise it leaves the run to a
 * worker that can (a claim would fail the run at its first lease, as `image_missing`), and says
 * why. A run whose shape it does not know is claimed as before.
 */
export class PlacementCheck {
  private readonly refused = new Map<string, { at: number; placement: Placement }>();

  constructor(private readonly d: { store: Store; sandbox: SandboxHost; hostRegistry?: string; now?: () => number }) {}

  async check(sessionId: string): Promise<Placement> {
    const now = (this.d.now ?? Date.now)();
    const seen = this.refused.get(sessionId);
    if (seen && now - seen.at < RECHECK_MS) return seen.placement;
    const placement = await this.decide(sessionId);
    if (placement.ok) this.refused.delete(sessionId);
    else this.refused.set(sessionId, { at: now, placement });
    return placement;
  }

  private async decide(sessionId: string): Promise<Placement> {
    const runs = await this.d.store.listRuns({ sessionId, states: OPEN_RUN_STATES });
    for (const run of runs) {
      const root = run.rootTaskId ? await this.d.store.getTask(run.rootTaskId) : undefined;
      const env = (root?.input as { environment?: EnvLike } | undefined)?.environment;
      const digest = env?.image?.digest;
      if (!digest) continue;
      if (await this.d.sandbox.hasImage(digest)) continue;
      const snaps = await this.d.store.listSnapshots({ runId: run.id, pruned: false });
      if (snaps.some((s) => s.registryRef !== null)) continue;
      const newest = snaps.at(-1);
      if (newest && (await this.d.sandbox.hasImage(newest.imageId))) continue;
      const registry = (env?.snapshot?.registry ?? this.d.hostRegistry)?.replace(/\/+$/, '');
      const what = `base image ${env?.image?.ref ?? ''} (${digest.slice(7, 19)}) is not on this engine`;
      if (!registry) return { ok: false, runId: run.id, why: `${what} and no registry is configured` };
      const present = await manifestPresent(registry, BASE_REPOSITORY, digest.replace(/^sha256:/, ''), { auth: registryAuth(registry.split('/')[0]!) });
      if (present === true) continue;
      return { ok: false, runId: run.id, why: present === false ? `${what} and registry ${registry} does not have it (yet)` : `${what} and registry ${registry} cannot be asked for it` };
    }
    return { ok: true };
  }
}
