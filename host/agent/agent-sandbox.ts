import type { Logger } from 'pino';
import type { Decision, PhaseContext } from '../kernel';
import { BerthError } from '../errors';
import { plainJson, type Json, type Task } from '../model';
import { SANDBOX_DOC, type RunSandbox, type SandboxPointer } from '../run-sandbox';
import type { Lease } from '../sandbox';
import type { Store } from '../store';
import type { Clock } from '../support';
import type { AgentRunInput } from './agent-input';
import { CallOrder } from './call-order';
import { KeyedLock } from './session-lock';

/** The sandbox state a committed tool result vouches for. */
export interface SandboxState {
  /** Orders measurements: the newest committed one is the sandbox's state. */
  measuredAt: number;
  workspaceDigest: string;
  /** The snapshot holding exactly this state, or null when none does (snapshot policy `never`). */
  snapshotId: string | null;
}

export type Acquired = { kind: 'ok'; lease: Lease; writes: NonNullable<Decision['writes']> } | { kind: 'reconcile'; reason: string };

export const TOOL_KIND = 'agent-tool';
export const sessionSandboxDocId = (sessionId: string) => `${sessionId}:agent-sandbox`;

/**
 * The sandbox of an agent session, on top of the plan runs' {@link RunSandbox} (lease, verify on
 * resume, restore from snapshot, snapshot). The session's pointer document names the current
 * lease; each mutating tool result carries the state it left (digest, snapshot) in its task
 * result, so tool tasks never write a shared document and cannot conflict with each other.
 */
export class AgentSandbox {
  private readonly lock = new KeyedLock();
  /** The calls of one turn take the sandbox in the model's order (call-order.ts). */
  readonly order: CallOrder;
  private readonly lastMeasured = new Map<string, number>();

  constructor(private readonly d: { store: Store; plan: RunSandbox; clock: Clock; logger: Logger }) {
    this.order = new CallOrder(d.store, TOOL_KIND);
  }

  /** Runs `fn` with the session's sandbox to itself. */
  exclusive<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
    return this.lock.run(sessionId, fn);
  }

  /** The session's sandbox for the root task: leased and filled on first use, verified (or restored) after. */
  async open(ctx: PhaseContext, input: AgentRunInput): Promise<Acquired> {
    const sessionId = ctx.task.sessionId;
    const docId = sessionSandboxDocId(sessionId);
    if (await ctx.readDocument(docId)) return this.ensure(ctx, input);
    const env = input.environment;
    const lease = await this.d.plan.leaseFresh(sessionId, sessionId, env, ctx.signal);
    const writes: NonNullable<Decision['writes']> = { documents: [{ documentId: docId, create: { type: SANDBOX_DOC } }] };
    if (input.workspaceDir) {
      const up = await lease.uploadDir(input.workspaceDir, env.workspace.path);
      // FIFOs, sockets and devices cannot be uploaded: the run's record names them.
      if (up.skipped.length) writes.entries = [{ kind: 'sandbox.upload', body: plainJson({ from: input.workspaceDir, files: up.files, bytes: up.bytes, skipped: up.skipped }) }];
    }
    if (env.snapshot.policy === 'after-each-step') {
      // Nothing uploaded: the fresh sandbox is its image, and that image is the snapshot (no commit).
      const fresh = input.workspaceDir ? undefined : await this.d.plan.freshImageSnapshot(sessionId, sessionId, env, lease, 'agent:start', ctx.signal);
      const s = fresh ? { ...fresh, lease } : await this.d.plan.snapshot(sessionId, sessionId, env, lease, 'agent:start', null, ctx.signal);
      writes.snapshots = [s.record];
      writes.documents!.push({ documentId: docId, op: s.pointer });
      return { kind: 'ok', lease: s.lease, writes };
    }
    const digest = await this.d.plan.digest(lease, env, ctx.signal);
    writes.documents!.push({ documentId: docId, op: { leaseId: lease.id, snapshotId: null, workspaceDigest: digest } });
    return { kind: 'ok', lease, writes };
  }

  /**
   * The sandbox a tool may use now. Within one process the held lease is trusted. After a restart
   * RunSandbox.ensure verifies it; the workspace digest is compared with the newest committed
   * state only when no tool of the run was caught in flight (its change may or may not be there).
   */
  async ensure(ctx: PhaseContext, input: AgentRunInput): Promise<Acquired> {
    const sessionId = ctx.task.sessionId;
    const docId = sessionSandboxDocId(sessionId);
    const pointer = (await ctx.readDocument<SandboxPointer & Json>(docId))?.state as SandboxPointer | undefined;
    if (!pointer) return { kind: 'reconcile', reason: `session ${sessionId} has no sandbox record` };
    const held = this.d.plan.held(sessionId);
    if (held && held.id === pointer.leaseId && !held.lost && !held.isReleased) {
      // What an earlier phase of this process verified, when its decision did not commit (it threw, was refused).
      const entries = this.d.plan.takeEntriesFor(ctx, sessionId);
      return { kind: 'ok', lease: held, writes: entries.length ? { entries } : {} };
    }
    const latest = await this.latest(sessionId);
    this.lastMeasured.set(sessionId, Math.max(this.lastMeasured.get(sessionId) ?? 0, latest?.measuredAt ?? 0));
    const expected: SandboxPointer = latest ? { leaseId: pointer.leaseId, snapshotId: latest.snapshotId, workspaceDigest: latest.workspaceDigest } : pointer;
    const inFlight = ctx.task.runId ? (await ctx.store.listEffects({ runId: ctx.task.runId })).some((e) => e.status === 'executing' && e.kind.startsWith('tool.')) : false;
    const ensured = await this.d.plan.ensure(sessionId, sessionId, input.environment, expected, { inFlight, replay: 'never', signal: ctx.signal });
    if (ensured.kind === 'reconcile') return ensured;
    this.d.logger.info({ sessionId, leaseId: ensured.lease.id, inFlight }, 'agent sandbox resumed');
    const op = ensured.pointer;
    const writes: NonNullable<Decision['writes']> = Object.keys(op).length ? { documents: [{ documentId: docId, op: op as Json }] } : {};
    // What this process verified of the sandbox (after a restart): committed with the tool that used it, the run's evidence that it checked.
    const entries = this.d.plan.takeEntriesFor(ctx, sessionId);
    if (entries.length) writes.entries = entries;
    return { kind: 'ok', lease: ensured.lease, writes };
  }

  /**
   * Stops what a tool call left running when the host running it died, before its cancel is
   * recorded (a `berth cancel` carried out with no live host; plan steps: host/plan/step-cancel.ts):
   * attaching each live sandbox of the session stops every command an earlier host started there
   * and waits for them to be gone, as a resume's attach does. A sandbox that is gone has nothing
   * left to stop; an engine that cannot be reached throws, so the cancel waits.
   */
  async stopAbandoned(task: Task, input: AgentRunInput): Promise<void> {
    for (const record of await this.d.store.listLeases({ sessionId: task.sessionId })) {
      if (record.releasedAt !== null) continue;
      const v = await this.d.plan.verifyRecord(record);
      if (!v.ok) {
        if (v.code === 'engine_unreachable') throw new BerthError('engine_unreachable', `cannot stop what call task ${task.id} left running: ${v.reason}`, { retryable: true, ids: { taskId: task.id, ...(task.runId ? { runId: task.runId } : {}) } });
        continue;
      }
      await this.exclusive(task.sessionId, () => this.d.plan.attachRecord(task.sessionId, record, input.environment));
    }
  }

  /** Measures (and, under policy `after-each-step` or when `snapshot` demands it, snapshots) the state a mutating tool left. */
  async record(ctx: PhaseContext, input: AgentRunInput, lease: Lease, label: string, snapshot = false): Promise<{ state: SandboxState; writes: NonNullable<Decision['writes']> }> {
    const sessionId = ctx.task.sessionId;
    const env = input.environment;
    const measuredAt = Math.max(this.d.clock.now(), (this.lastMeasured.get(sessionId) ?? 0) + 1);
    this.lastMeasured.set(sessionId, measuredAt);
    if (snapshot || env.snapshot.policy === 'after-each-step') {
      const parent = (await this.latest(sessionId))?.snapshotId ?? null;
      const s = await this.d.plan.snapshot(sessionId, sessionId, env, lease, `tool:${label}`, parent, ctx.signal);
      return { state: { measuredAt, workspaceDigest: s.record.workspaceDigest, snapshotId: s.record.id }, writes: { snapshots: [s.record] } };
    }
    return { state: { measuredAt, workspaceDigest: await this.d.plan.digest(lease, env, ctx.signal), snapshotId: null }, writes: {} };
  }

  /** The newest state a committed tool result of the session vouches for. */
  async latest(sessionId: string): Promise<SandboxState | null> {
    let best: SandboxState | null = null;
    for (const t of await this.d.store.listTasks({ sessionId })) {
      if (t.kind !== TOOL_KIND || t.status !== 'terminal') continue;
      const s = (t.result as { sandbox?: SandboxState } | null)?.sandbox;
      if (s && (!best || s.measuredAt > best.measuredAt)) best = s;
    }
    return best;
  }
}
