import type { Json, Task } from '../model';
import { isUnresolvedEffect } from '../model';
import type { RunRows } from './build-record';
import type { RunRecord } from './schema';

type Sections = Pick<RunRecord, 'checkpoint' | 'retryAndTimeout' | 'approvals' | 'isolation' | 'recovery' | 'acceptance' | 'cost' | 'artifacts' | 'ownership' | 'unresolved'> & {
  job: Omit<RunRecord['job'], 'submission'>;
};

const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});
const num = (v: Json | undefined): number | null => (typeof v === 'number' ? v : null);

const RESUME_RULE: Record<string, string> = {
  plan:
    're-enter the saved phase of every unfinished task; verify the sandbox (container, image, environment fingerprint, kernel range, workspace digest) ' +
    'or restore the snapshot holding the newest committed workspace digest; a safe step re-runs, a never step caught in flight waits for berth reconcile',
  agent:
    're-enter the saved phase of every unfinished task; rebuild the model context from entries; a tool in execute re-runs only if its replay policy is safe ' +
    'at call time and now, a verify tool is asked about its effect id first, otherwise an interruption is recorded',
};

/** The contract's sections derived from the stored rows (everything but the raw collections). */
export function contractSections(rows: RunRows): Sections {
  const { run, tasks, effects, entries, transitions } = rows;
  const root = tasks.find((t) => t.id === run.rootTaskId);
  const input = obj(root?.input);
  const environment = input.environment === undefined ? undefined : obj(input.environment);
  const plan = obj(input.plan);
  const resources = obj(environment?.resources);
  const network = obj(environment?.network);
  const secrets = Array.isArray(environment?.secrets) ? environment.secrets.map(obj) : [];
  const steps = Array.isArray(plan.steps) ? plan.steps.map(obj) : [];
  const firstTransition = transitions[0];

  const approvals = approvalsOf(entries);
  const takeOverSeqs = new Set(rows.commits.filter((c) => c.label === 'run.take-over').map((c) => c.seq));
  const unresolved: RunRecord['unresolved'] = [
    ...effects.filter((e) => isUnresolvedEffect(e.status)).map((e) => ({ kind: 'effect' as const, id: e.id, status: e.status, why: e.status === 'unknown' ? 'may or may not have happened' : `still ${e.status}` })),
    ...approvals.filter((a) => a.decision === 'pending').map((a) => ({ kind: 'approval' as const, id: a.approvalId, status: 'pending', why: `tool ${a.tool} waits for an operator` })),
    ...tasks.filter((t) => t.blockedReason).map((t) => ({ kind: 'task' as const, id: t.id, status: t.status, why: t.blockedReason! })),
    ...(run.state === 'needs_reconciliation' ? [{ kind: 'run' as const, id: run.id, status: run.state, why: transitions.at(-1)?.reason ?? '' }] : []),
  ];

  return {
    job: {
      requestId: rows.submission?.requestId ?? null,
      submissionId: rows.submission?.id ?? null,
      submittedAt: rows.submission?.createdAt ?? null,
      submitter: firstTransition?.actor ?? null,
      objective:
        run.kind === 'plan'
          ? { plan: plan.name ?? null, planFile: input.planFile ?? null, steps: steps.map((s) => ({ name: s.name ?? null, run: s.run ?? null, replay: s.replay ?? null })) }
          : run.kind === 'agent'
            ? { message: typeof input.message === 'string' ? input.message : null }
            : { rootKind: root?.kind ?? null, input: root?.input ?? null },
      acceptanceRule: acceptanceRuleOf(run.kind, plan),
      authorityReference: { recorded: false, note: 'Berth records the actor of each transition and decision, not an authority document' },
    },
    checkpoint: {
      store: 'sqlite',
      lastCommittedTransition: transitions.at(-1)?.n ?? null,
      lastCommitSeq: rows.commits.at(-1)?.seq ?? 0,
      resumeRule: RESUME_RULE[run.kind] ?? 're-enter the saved phase of every unfinished task (kernel phase contract)',
    },
    retryAndTimeout: {
      commandTimeoutS: num(resources.commandTimeoutS),
      runBudgetS: num(resources.runBudgetS),
      leaseTtlS: num(obj(environment?.lease).ttlS),
      stepReplay: steps.map((s) => ({ step: String(s.name ?? ''), replay: String(s.replay ?? 'safe') })),
      taskAttempts: tasks.map((t) => ({ taskId: t.id, attempts: t.attempts, restarts: t.restarts })),
    },
    approvals,
    isolation: {
      engine: 'docker',
      environment: environment ? stripSecretSources(environment) : { recorded: false, note: `a ${run.kind} run records no environment` },
      network: { mode: typeof network.mode === 'string' ? network.mode : null, allow: Array.isArray(network.allow) ? network.allow.map(String) : [] },
      secrets: secrets.map((s) => ({ name: String(s.name ?? ''), to: Array.isArray(s.to) ? s.to.map(String) : [] })),
      limits: resources,
      leases: rows.leases.map(({ sessionId: _s, ...l }) => l),
      snapshots: rows.snapshots.map(({ sessionId: _s, ...s }) => s),
    },
    recovery: {
      restarts: tasks.reduce((n, t) => n + t.restarts, 0),
      interruptedTasks: tasks.filter((t) => t.outcome === 'interrupted').map((t) => t.id),
      reconciliations: transitions.filter((t) => t.to === 'needs_reconciliation' || t.to === 'reconciling' || t.from === 'reconciling').map(({ runId: _r, ...t }) => t),
      cancellation: tasks.filter((t) => cancelledOf(t) !== null).map((t) => ({ taskId: t.id, ...cancelledOf(t)! })),
      completionEvidence: root ? { rootTask: root.id, outcome: root.outcome, error: root.error as Json, result: root.result } : null,
    },
    acceptance: {
      // The same reading as `berth show` (host/acceptance): the newest decision wins.
      verdict: rows.acceptance.at(-1)?.decision ?? (run.state === 'completed' ? 'pending' : 'none'),
      decisions: rows.acceptance.map(({ runId: _r, ...d }) => d),
    },
    cost: { samples: rows.costSamples.map(({ runId: _r, ...c }) => c), summary: rows.costSummary },
    artifacts:
      run.kind === 'plan'
        ? rows.artifacts.map(({ sessionId: _s, runId: _r, ...a }) => a)
        : { recorded: false, note: `a ${run.kind} run declares no artifacts (plan steps do)` },
    ownership: {
      owner: rows.owner ? { epoch: rows.owner.epoch, holder: rows.owner.holder, pid: rows.owner.pid, takenAt: rows.owner.takenAt, heartbeatAt: rows.owner.heartbeatAt, leaseUntil: rows.owner.leaseUntil, stoppedAt: rows.owner.stoppedAt } : null,
      takeOvers: transitions.filter((t) => takeOverSeqs.has(t.commitSeq)).map((t) => ({ n: t.n, at: t.at, actor: t.actor, commitSeq: t.commitSeq })),
    },
    unresolved,
  };
}

/** The rule that judges the run: a plan's `acceptance` (default manual); an agent run is judged by an operator only. */
function acceptanceRuleOf(kind: string, plan: Record<string, Json>): RunRecord['job']['acceptanceRule'] {
  if (kind === 'agent') return { kind: 'manual' };
  if (kind !== 'plan') return { recorded: false, note: `a ${kind} run has no acceptance rule` };
  const a = plan.acceptance;
  if (a === undefined || a === null || a === 'manual') return { kind: 'manual' };
  const c = obj(a);
  return { kind: 'command', command: String(c.command ?? ''), replay: c.replay === 'never' ? 'never' : 'safe', timeoutS: num(c.timeoutS) };
}

/** A cancelled task's record of where its work stopped (host/kernel cancel-record). */
function cancelledOf(t: Task): Record<string, Json> | null {
  const c = obj(obj(t.result).cancelled);
  return Object.keys(c).length ? c : null;
}

/** The manifest with secret sources (a host variable name or file path) removed: only names and grants are part of the record. */
function stripSecretSources(env: Record<string, Json>): Json {
  const secrets = Array.isArray(env.secrets) ? env.secrets.map((s) => { const { from: _f, ...rest } = obj(s); return rest; }) : env.secrets;
  return { ...env, ...(secrets === undefined ? {} : { secrets }) };
}

/** Every approval request of the run with its decision, from the entries. */
function approvalsOf(entries: RunRows['entries']): RunRecord['approvals'] {
  const decided = new Map<string, { decision: string; by: string | null; at: number }>();
  for (const e of entries) {
    if (e.kind !== 'agent.approval.decided') continue;
    const b = obj(e.body);
    decided.set(String(b.approvalId), { decision: String(b.decision), by: typeof b.by === 'string' ? b.by : null, at: e.at });
  }
  return entries
    .filter((e) => e.kind === 'agent.approval.requested')
    .map((e) => {
      const b = obj(e.body);
      const d = decided.get(String(b.approvalId));
      const decision = d?.decision === 'approved' || d?.decision === 'denied' || d?.decision === 'expired' || d?.decision === 'cancelled' ? d.decision : 'pending';
      return {
        approvalId: String(b.approvalId), toolCallId: String(b.toolCallId), tool: String(b.tool), scopeDigest: String(b.digest),
        expiresAt: num(b.expiresAt), requestedAt: e.at, decision, approver: d?.by ?? null, decidedAt: d?.at ?? null,
      };
    });
}
