import { plainJson, SANDBOX_SWEPT, SANDBOX_VERIFIED, type Json } from '../model';
import type { Lease } from '../sandbox';
import type { SandboxVerification } from './run-sandbox';

/**
 * One sweep a process made of a run's sandboxes before using them (DESIGN.md "no command outlives
 * its owner"), as the `sandbox.swept` entry the next commit of the run carries:
 * - `commands`: it adopted the sandbox and stopped what earlier hosts left running there;
 * - `removed`: it removed a sandbox of the run that an earlier owner left (`stale_epoch`: not the
 *   pointer's; `in_flight_safe_step`: the pointer's, with a safe step's command caught mid-run);
 * - `lost`: verification found the pointer's sandbox unusable (gone, stopped, expired, released);
 *   `sweptBy` names the host-wide sweep that removed its container, when the store's sweep log has one.
 */
export type SweepEntry =
  | { what: 'commands'; leaseId: string; containerId: string; epoch: number | null; killedProcesses: number; commands: Array<{ tag: string | null; state: 'killed' | 'ended'; exitCode: number | null }>; kept: number }
  | { what: 'removed'; leaseId: string; containerId: string; reason: 'stale_epoch' | 'in_flight_safe_step'; epoch: number | null }
  | { what: 'lost'; leaseId: string; reason: string; sweptBy?: { hostId: string; reason: string; at: number; containerId: string } };

/** The sweeps of each run since its last commit took them. */
export class SweepLog {
  private readonly byRun = new Map<string, SweepEntry[]>();

  add(runId: string, e: SweepEntry): void {
    this.byRun.set(runId, [...(this.byRun.get(runId) ?? []), e]);
  }

  /** What `attach` stopped in the sandbox (nothing on a lease this process created). */
  adopted(runId: string, lease: Lease, epoch: number | undefined): void {
    const found = lease.attachedEarlier;
    if (!found) return;
    const commands = found.commands.map((c) => ({ tag: c.tag ?? null, state: c.state, exitCode: c.exitCode ?? null }));
    this.add(runId, { what: 'commands', leaseId: lease.id, containerId: lease.containerId, epoch: epoch ?? null, killedProcesses: found.killedProcesses, commands, kept: found.kept.length });
    // Reported once: a later adoption of the same lease by this process found nothing new.
    lease.attachedEarlier = undefined;
  }

  peek(runId: string): readonly SweepEntry[] {
    return this.byRun.get(runId) ?? [];
  }

  take(runId: string): SweepEntry[] {
    const e = this.byRun.get(runId) ?? [];
    this.byRun.delete(runId);
    return e;
  }
}

/** The entries a step (or tool) commits about its sandbox: the sweeps first, then the verification. */
export function sandboxEntries(swept: SweepEntry[], verified: SandboxVerification | undefined): Array<{ kind: string; body: Json }> {
  return [...swept.map((s) => ({ kind: SANDBOX_SWEPT, body: plainJson(s) })), ...(verified ? [{ kind: SANDBOX_VERIFIED, body: plainJson(verified) }] : [])];
}
