import type { Json } from '../model';
import type { RunRows } from './build-record';
import type { ContractFields, RunRecord } from './schema';

/** What the exporting process knows of a task kind's handler (the store keeps only the kind and version). */
export interface HandlerPolicy {
  maxRetries?: number;
  restartLimit?: number;
}
export type HandlerPolicies = (kind: string, version: number) => HandlerPolicy | undefined;

/**
 * The policies of the handlers a host registered (its built-in kinds and the application kinds of
 * its extensions): what an export by that host knows. The registry's own lookup, so a handler that
 * accepts an older version answers for it as it would run it.
 */
export const registeredPolicies = (registry: { find(kind: string, version: number): HandlerPolicy | undefined }): HandlerPolicies => (kind, version) => registry.find(kind, version);

/** The kernel's phase retry when a handler sets no `maxRetries` (host/kernel/phase-runner.ts). */
const KERNEL_MAX_RETRIES = 3;
/** The kernel's restart limit when a handler sets no `restartLimit` (host/kernel/idle-transitions.ts). */
const KERNEL_RESTART_LIMIT = 5;
const KERNEL_BACKOFF = '100 ms × 2^attempt before each retry of a phase that threw a retryable error';

const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});
const num = (v: Json | undefined): number | null => (typeof v === 'number' ? v : null);
const notRecorded = (note: string) => ({ recorded: false as const, note });

/**
 * The seed contract's fields Berth's records hold beyond the raw collections (retry budget and
 * backoff per task kind, timeouts, cancellation grace, attempt ids, retention and deletions,
 * dependency-failure action, versions per transition), each marked `recorded: false` with the
 * reason where Berth cannot know it.
 */
export function contractFields(rows: RunRows, policies?: HandlerPolicies): ContractFields {
  const { run, tasks } = rows;
  const root = tasks.find((t) => t.id === run.rootTaskId);
  const input = obj(root?.input);
  const plan = obj(input.plan);
  const steps = Array.isArray(plan.steps) ? plan.steps.map(obj) : [];
  const resources = obj(obj(input.environment).resources);
  const model = obj(obj(input.settings).model);
  const kinds = [...new Map(tasks.map((t) => [`${t.kind}@${t.kindVersion}`, { kind: t.kind, version: t.kindVersion }])).values()];

  return {
    retry: kinds.map(({ kind, version }) => {
      const p = policies?.(kind, version);
      const unknown = `the handler of ${kind}@${version} is not registered in the exporting process (the store keeps the kind, not its policy; export from a host that loads the program registering it, e.g. berth --extension FILE export); the kernel defaults are ${KERNEL_MAX_RETRIES} retries and ${KERNEL_RESTART_LIMIT} restarts unless the handler sets its own`;
      return {
        kind,
        version,
        maxRetries: p ? p.maxRetries ?? KERNEL_MAX_RETRIES : notRecorded(unknown),
        restartLimit: p ? p.restartLimit ?? KERNEL_RESTART_LIMIT : notRecorded(unknown),
        backoff: KERNEL_BACKOFF,
      };
    }),
    modelRetry:
      run.kind === 'agent' && num(model.maxAttempts) !== null
        ? { maxAttempts: num(model.maxAttempts)!, backoffMs: num(model.backoffMs), maxBackoffMs: num(model.maxBackoffMs) }
        : notRecorded(`a ${run.kind} run calls no model`),
    timeouts: {
      commandTimeoutS: num(resources.commandTimeoutS),
      runBudgetS: num(resources.runBudgetS),
      steps: steps.map((s) => ({ step: String(s.name ?? ''), timeoutS: num(s.timeoutS) })),
      acceptanceTimeoutS: num(obj(plan.acceptance).timeoutS),
      modelTimeoutMs: run.kind === 'agent' ? num(model.timeoutMs) : null,
    },
    cancellationGrace: notRecorded('Berth keeps no cancellation grace per run: a cancel kills the step\'s process tree and records where each task stopped (recovery.cancellation)'),
    effectAttempts: rows.effects.map((e) => ({
      effectId: e.id,
      attempts: e.attempts,
      // Effects written before schema 22 kept only a count of their attempts.
      attemptIds: e.attemptLog.length > 0 ? e.attemptLog.map((a) => a.id) : notRecorded('an effect written before attempt logs (schema 22) keeps only a count of its attempts'),
    })),
    retention: {
      rule: notRecorded('retention is chosen per `berth gc` invocation (--keep, --forks-older-than), not stored with the run'),
      deletions: [
        ...rows.snapshots.filter((s) => s.prunedAt !== null).map((s) => ({ what: 'snapshot' as const, id: s.id, at: s.prunedAt! })),
        ...rows.leases.filter((l) => l.releasedAt !== null).map((l) => ({ what: 'lease' as const, id: l.id, at: l.releasedAt! })),
      ],
    },
    dependencyFailure:
      run.kind === 'plan'
        ? steps.map((s) => ({ step: String(s.name ?? ''), action: s.allowFailure === true ? ('continue' as const) : ('fail_run' as const) }))
        : notRecorded(`a ${run.kind} run declares no dependency-failure action; a failed child task is handed to its parent task's handler`),
    transitionVersions: rows.transitions.map((t) => ({
      n: t.n,
      versions: t.versions,
      // The task kinds live at the transition: created at or before it.
      taskKinds: [...new Map(tasks.filter((k) => k.createdAt <= t.at).map((k) => [`${k.kind}@${k.kindVersion}`, { kind: k.kind, version: k.kindVersion }])).values()],
    })),
  };
}

export type { RunRecord };
