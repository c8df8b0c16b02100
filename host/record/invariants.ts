import { isLegalRunTransition, isUnresolvedEffect, SANDBOX_SWEPT, SANDBOX_VERIFIED, TASK_RESTARTED, type Json } from '../model';
import type { RunRecord } from './schema';

/** One broken rule of one run, with what shows it. */
export interface Violation {
  invariant: InvariantName;
  runId: string;
  message: string;
  evidence: Json;
}

/**
 * The invariants `berth check` evaluates, by stable name: seed 004's eight (the contract's) and
 * Berth's own. Each reads only the record, so stored, imported and exported runs are judged alike.
 */
export const INVARIANTS = {
  completed_with_unresolved: 'a run is not completed while an approval or an effect is unresolved (seed 004 #1)',
  retry_same_effect: 'a retried effect keeps one logical key and records why replay was safe: safe/verify replay, or every earlier attempt proven not applied (seed 004 #2)',
  in_flight_owner: 'an effect in flight or uncertain names the task that owns it, and the run keeps a durable last transition (seed 004 #3)',
  resume_verified: 'a resumed run records the versions it verified (kernel, environment fingerprint): on every transition after admission, and per restart, before a restarted step\'s output or a restarted agent tool\'s result, what its process verified of the sandbox (seed 004 #4)',
  cancel_records_point: 'a cancelled task records whether its work stopped before, after or unknown relative to its effects (seed 004 #5)',
  compensation_declared: 'compensation happens only through a declared operation: a compensated effect or run names it (seed 004 #6)',
  sandbox_cleanup_visible: 'an ended run releases its own sandbox leases, or the unreleased lease is visible as a violation (seed 004 #7)',
  acceptance_separate: 'acceptance is recorded apart from completion, never implied by the run state (seed 004 #8)',
  legal_transitions: 'every transition is an edge of the run state machine, starts where the previous one ended, and the last one is the run state',
  monotonic_sequences: 'transition numbers run 1..n without gaps; commit, entry and transition commit numbers never go back',
  never_once: 'an action whose replay is never is confirmed at most once (one confirmed effect per kind and intent)',
  checkpoint_refs_exist: 'every snapshot a checkpoint, result or sandbox pointer names is in the record',
  task_refs_exist: 'every task the run names is in the record: its root task, each task\'s parent, and the task of each of its own effects',
  cancel_matches_effects: 'a cancelled task\'s evidence covers the effects of its work (its own and its subtasks\'): every one that started is listed, `before` only when none did, `after` only when all happened (seed 004 #5)',
  approvals_closed: 'a run in a final state has no open approval: each request was decided, expired or closed by the cancel (seed 004 #1)',
  settled_provenance: 'every settled effect says how it was settled: each attempt it counts is in its attempt log, and the attempt that settled it names how (its reply, a status query, an operator\'s word with the operator, a restore, a cancel)',
  sweeps_accounted: 'a restart that took up a live sandbox an earlier owner left (adopted it, or removed it with a step caught mid-run) records the sweep: a sandbox.swept entry names that sandbox and what was stopped or removed, before the verification that used it',
} as const;
export type InvariantName = keyof typeof INVARIANTS;

const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});
const FINAL = new Set(['completed', 'failed', 'cancelled', 'compensated']);

/** Every violation of every invariant in one run record (empty when the run keeps them all). */
export function checkRecord(r: RunRecord): Violation[] {
  const out: Violation[] = [];
  const runId = r.run.id;
  const v = (invariant: InvariantName, message: string, evidence: Json) => out.push({ invariant, runId, message, evidence });

  // Effects a later run attempted afresh stay in this run's record (its attempts are history) but
  // are that run's to settle: only the run's own are judged by their status.
  const own = r.effects.filter((e) => e.runId === undefined || e.runId === null || e.runId === runId);

  // 1. completed with something unresolved
  if (r.run.state === 'completed') {
    const effects = own.filter((e) => isUnresolvedEffect(e.status)).map((e) => ({ id: e.id, status: e.status }));
    const approvals = r.approvals.filter((a) => a.decision === 'pending').map((a) => a.approvalId);
    if (effects.length || approvals.length) v('completed_with_unresolved', `run ${runId} is completed with ${effects.length} unresolved effect(s) and ${approvals.length} open approval(s)`, { effects, approvals });
  }

  // approvals are closed once the run is final: nobody can decide them any more
  if (FINAL.has(r.run.state)) {
    const open = r.approvals.filter((a) => a.decision === 'pending').map((a) => a.approvalId);
    if (open.length) v('approvals_closed', `run ${runId} is ${r.run.state} but approval(s) ${open.join(', ')} are still pending: no decision can reach them now`, { state: r.run.state, approvals: open });
  }

  // 2. retries: same key, and a reason replay was safe
  // Each attempt before the newest must be proven not applied (by its reply, a status query, an
  // operator or a cancel); a record made before attempts were kept has only the count and the error.
  for (const e of r.effects) {
    if (e.attempts <= 1 || e.replay !== 'never') continue;
    const log = e.attemptLog ?? [];
    if (log.length === 0) {
      if (e.error === null) v('retry_same_effect', `effect ${e.id} (replay never) has ${e.attempts} attempts and no recorded failure of an earlier one`, { effect: e.id, attempts: e.attempts, status: e.status });
      continue;
    }
    const unproven = log.slice(0, -1).filter((a) => a.outcome !== 'not_applied').map((a) => ({ attempt: a.id, outcome: a.outcome, settledBy: a.settledBy }));
    if (unproven.length) v('retry_same_effect', `effect ${e.id} (replay never) was attempted again after attempt(s) ${unproven.map((u) => `${u.attempt} (${u.outcome})`).join(', ')} that nothing proved not applied`, { effect: e.id, attempts: e.attempts, unproven });
  }
  // ... and one action attempted again under a new key: a plan step's next generation (`…:g1`) is
  // made only when the earlier one was settled as not having happened. That settlement must be on
  // record (the attempt, how it was learnt, who said so); a bare `failed` proves nothing.
  const generations = new Map<string, RunRecord['effects']>();
  for (const e of r.effects) {
    if (e.replay !== 'never' || logicalAction(e.id) === e.id) continue;
    const key = `${e.kind} ${logicalAction(e.id)}`;
    generations.set(key, [...(generations.get(key) ?? []), e]);
  }
  for (const gens of generations.values()) {
    gens.sort((a, b) => generationOf(a.id) - generationOf(b.id));
    for (const [i, e] of gens.slice(0, -1).entries()) {
      const next = gens[i + 1]!;
      if (e.status !== 'failed' || e.attempts === 0) continue;
      const log = e.attemptLog ?? [];
      const unproven = log.filter((a) => a.outcome !== 'not_applied' || a.settledBy === null).map((a) => ({ attempt: a.id, outcome: a.outcome, settledBy: a.settledBy }));
      if (log.length < e.attempts) v('retry_same_effect', `effect ${next.id} (replay never) attempts the action of ${e.id} again, but ${e.id} records ${log.length} of its ${e.attempts} attempt(s): nothing on record proves the earlier one did not happen`, { effect: e.id, next: next.id, attempts: e.attempts, recorded: log.length, receipt: e.receipt, error: e.error });
      else if (unproven.length) v('retry_same_effect', `effect ${next.id} (replay never) attempts the action of ${e.id} again after attempt(s) ${unproven.map((u) => `${u.attempt} (${u.outcome})`).join(', ')} that nothing proved not applied`, { effect: e.id, next: next.id, unproven });
    }
  }

  // provenance of every settled effect: each attempt it counts is on record, and the attempt that
  // settled it says how that was learnt and, for a person's word, whose. A record written before
  // attempts were kept has only a count and a status: it claims a settlement it cannot show.
  for (const e of r.effects) {
    if (e.status !== 'confirmed' && e.status !== 'failed' && e.status !== 'compensated') continue;
    const log = e.attemptLog ?? [];
    if (e.attempts === 0 && log.length === 0) continue;
    const last = log.at(-1);
    const what = e.status === 'failed' ? 'that it did not happen' : 'that it happened';
    if (log.length < e.attempts || !last) v('settled_provenance', `effect ${e.id} is ${e.status} after ${e.attempts} attempt(s), but its record holds ${log.length} of them: nothing says how it was learnt ${what}, or by whom`, { effect: e.id, status: e.status, attempts: e.attempts, recorded: log.length, receipt: e.receipt, error: e.error });
    else if (last.settledBy === null) v('settled_provenance', `effect ${e.id} is ${e.status}, but its attempt ${last.id} (${last.outcome}) names no way it was settled`, { effect: e.id, attempt: last.id, outcome: last.outcome });
    else if ((last.settledBy === 'operator' || last.settledBy === 'restore') && !last.actor) v('settled_provenance', `effect ${e.id} is ${e.status} on an operator's word (attempt ${last.id}) that names no operator`, { effect: e.id, attempt: last.id, settledBy: last.settledBy });
  }

  // 3. in-flight effects have an owner and the run a last transition
  const taskIds = new Set(r.tasks.map((t) => t.id));
  for (const e of own) {
    if (e.status !== 'executing' && e.status !== 'unknown') continue;
    if (!e.taskId || !taskIds.has(e.taskId)) v('in_flight_owner', `effect ${e.id} is ${e.status} but names no task of the run that owns it`, { effect: e.id, taskId: e.taskId });
  }
  if (r.transitions.length === 0) v('in_flight_owner', `run ${runId} has no durable transition`, { transitions: 0 });

  // 4. resumed runs record the versions they verified
  const resumed = r.tasks.some((t) => t.restarts > 0);
  if (resumed && (r.run.kind === 'plan' || r.run.kind === 'agent')) {
    const bare = r.transitions.filter((t) => t.n > 1 && (!t.versions.kernel || !t.versions.envFingerprint)).map((t) => t.n);
    if (bare.length) v('resume_verified', `run ${runId} was resumed but transitions ${bare.join(', ')} record no kernel version or environment fingerprint`, { transitions: bare });
  }
  // ... and what each restart really verified: a step restarted after a kill commits what its
  // process checked of the sandbox (kernel, environment fingerprint, image, workspace or the
  // snapshot it restored) before any output it produced there; the transitions' versions are the
  // admission's, carried over, and prove nothing about a restart.
  const restartedAt = new Map<string, number>();
  const swept = new Set<string>();
  // Agent tools share the session's sandbox, and only the first to take it up in a resumed process
  // verifies it (the others find it held): a restarted tool's result needs a verification since its restart, by any tool.
  const toolRestartedAt = new Map<string, number>();
  let lastVerified = -1;
  for (const e of r.entries) {
    if (!e.taskId) continue;
    if (e.kind === TASK_RESTARTED) {
      restartedAt.set(e.taskId, e.seq);
      toolRestartedAt.set(e.taskId, e.seq);
    } else if (e.kind === 'agent.tool_result' && toolRestartedAt.has(e.taskId)) {
      const at = toolRestartedAt.get(e.taskId)!;
      toolRestartedAt.delete(e.taskId);
      // Results committed without using the sandbox (refused, denied, expired, no such tool, sandbox unusable) have nothing to verify.
      const status = obj(e.body).status;
      if ((status === 'ok' || status === 'interrupted') && lastVerified < at) v('resume_verified', `tool task ${e.taskId} was restarted (entry #${at}) and its result (entry #${e.seq}) came from a sandbox nothing verified since the restart`, { task: e.taskId, restartEntry: at, resultEntry: e.seq });
    }
    else if (e.kind === SANDBOX_SWEPT) {
      const lease = obj(e.body).leaseId;
      if (typeof lease === 'string') swept.add(lease);
    } else if (e.kind === SANDBOX_VERIFIED) {
      lastVerified = e.seq;
      const b = obj(e.body);
      // Taking up a sandbox stops what earlier hosts left running there; replacing a live one kills it.
      const replaced = obj(b.replaced);
      const live = b.how === 'attached' ? b.leaseId : b.how === 'restored' && replaced.live === true ? replaced.leaseId : undefined;
      if (typeof live === 'string' && !swept.has(live)) v('sweeps_accounted', `task ${e.taskId} ${b.how === 'attached' ? 'took up' : 'replaced'} sandbox lease ${live} (entry #${e.seq}) with no record of what it stopped or removed there`, { entry: e.id, task: e.taskId, lease: live, how: b.how ?? null });
      const admitted = r.run.versions.envFingerprint;
      if (typeof b.kernel !== 'string' || typeof b.envFingerprint !== 'string') v('resume_verified', `entry ${e.id} says task ${e.taskId} verified its sandbox but names no kernel version or environment fingerprint`, { entry: e.id, body: e.body });
      else if (admitted && b.envFingerprint !== admitted) v('resume_verified', `task ${e.taskId} verified a sandbox of environment ${b.envFingerprint}, not the run's ${admitted}`, { entry: e.id, verified: b.envFingerprint, admitted });
      restartedAt.delete(e.taskId);
    } else if (e.kind === 'plan.step.output' && restartedAt.has(e.taskId)) {
      v('resume_verified', `task ${e.taskId} was restarted (entry #${restartedAt.get(e.taskId)}) and produced step output (entry #${e.seq}) with no record of verifying its sandbox first`, { task: e.taskId, restartEntry: restartedAt.get(e.taskId)!, outputEntry: e.seq });
      restartedAt.delete(e.taskId);
    }
  }

  // 5. cancellation says where work stopped
  for (const t of r.tasks) {
    if (t.outcome !== 'cancelled') continue;
    const point = obj(obj(t.result).cancelled).effect;
    if (point !== 'before' && point !== 'after' && point !== 'unknown') v('cancel_records_point', `task ${t.id} (${t.kind}) was cancelled without recording whether its work stopped before, after or unknown`, { task: t.id, result: t.result });
  }

  // 5b. and what it says matches the effects of its work
  const children = new Map<string, string[]>();
  for (const t of r.tasks) if (t.parentId) children.set(t.parentId, [...(children.get(t.parentId) ?? []), t.id]);
  for (const t of r.tasks) {
    const c = obj(obj(t.result).cancelled);
    if (t.outcome !== 'cancelled' || t.status !== 'terminal' || typeof c.effect !== 'string') continue;
    const listed = new Set(Array.isArray(c.effectIds) ? c.effectIds.map(String) : []);
    const under = new Set<string>();
    for (const stack = [t.id]; stack.length; ) {
      const id = stack.pop()!;
      if (under.has(id)) continue;
      under.add(id);
      stack.push(...(children.get(id) ?? []));
    }
    const work = r.effects.filter((e) => e.taskId !== null && under.has(e.taskId) && e.status !== 'intended');
    const missing = work.filter((e) => !listed.has(e.id)).map((e) => ({ id: e.id, status: e.status }));
    const unsettled = work.filter((e) => listed.has(e.id) && (e.status === 'unknown' || e.status === 'executing')).map((e) => ({ id: e.id, status: e.status }));
    // A failed effect did not happen (a refused action, or one settled as not applied): stopping before it is the truth.
    const happened = work.filter((e) => e.status !== 'failed');
    if (missing.length) v('cancel_matches_effects', `task ${t.id} (${t.kind}) was cancelled saying its work stopped ${c.effect}, but does not list effect(s) ${missing.map((m) => m.id).join(', ')} of its work that started`, { task: t.id, said: c, missing });
    else if (c.effect === 'before' && happened.length) v('cancel_matches_effects', `task ${t.id} (${t.kind}) says its work stopped before its effects, but ${happened.length} of them may have happened`, { task: t.id, said: c, started: happened.map((e) => e.id) });
    else if (c.effect === 'after' && unsettled.length) v('cancel_matches_effects', `task ${t.id} (${t.kind}) says its work stopped after its effects happened, but ${unsettled.map((u) => `${u.id} is ${u.status}`).join(', ')}`, { task: t.id, said: c, unsettled });
  }

  // 6. compensation only through a declared operation
  for (const e of own) {
    if (e.status === 'compensated' && typeof obj(e.receipt).compensation !== 'string') v('compensation_declared', `effect ${e.id} is compensated without naming the operation that undid it`, { effect: e.id, receipt: e.receipt });
  }
  if (r.run.state === 'compensated' && !own.some((e) => e.status === 'compensated')) v('compensation_declared', `run ${runId} is compensated but no effect records a compensation`, { state: r.run.state });

  // 7. an ended run's own sandboxes are released
  if (FINAL.has(r.run.state)) {
    const held = r.isolation.leases.filter((l) => l.runId === runId && l.releasedAt === null).map((l) => ({ lease: l.id, container: l.containerId }));
    if (held.length) v('sandbox_cleanup_visible', `run ${runId} is ${r.run.state} but its lease(s) ${held.map((h) => h.lease).join(', ')} were never released`, held);
  }

  // 8. acceptance apart from completion
  // A decision judges a completed run and is never a state change: it is committed with the
  // completion (the acceptance command) or after it (an operator), and no transition moves the run
  // off `completed` because of it (a rejected run stays completed). The verdict is the newest decision.
  const decisions = r.acceptance.decisions;
  const completedAt = r.transitions.find((t) => t.to === 'completed')?.commitSeq ?? null;
  if (decisions.length && r.run.state !== 'completed') v('acceptance_separate', `run ${runId} is ${r.run.state} but has ${decisions.length} acceptance decision(s): only a completed run is judged, and judging never changes its state`, { state: r.run.state, decisions: decisions.map((d) => d.id) });
  for (const d of decisions) {
    if (completedAt === null || d.commitSeq < completedAt) v('acceptance_separate', `acceptance decision ${d.id} (${d.decision}) was committed before the run completed`, { decision: d.id, commitSeq: d.commitSeq, completedAt });
    const moved = r.transitions.filter((t) => t.commitSeq === d.commitSeq && t.to !== 'completed').map((t) => t.n);
    if (moved.length) v('acceptance_separate', `acceptance decision ${d.id} was committed with run transition(s) ${moved.join(', ')}: a decision never rewrites the run state`, { decision: d.id, transitions: moved });
  }
  const verdict = decisions.at(-1)?.decision ?? (r.run.state === 'completed' ? 'pending' : 'none');
  if (r.acceptance.verdict !== verdict) v('acceptance_separate', `run ${runId} records acceptance ${r.acceptance.verdict} but its decisions say ${verdict}: acceptance is never implied by the run state`, { recorded: r.acceptance.verdict, fromDecisions: verdict });

  // legal transitions
  let prev: string | null = null;
  // A take-over (`berth resume --take-over`) is logged as a row that keeps the state, in its own commit.
  const takeOvers = new Set(r.commits.filter((c) => c.label === 'run.take-over').map((c) => c.seq));
  for (const t of r.transitions) {
    const ownerChange = t.from !== null && t.from === t.to && !FINAL.has(t.from) && takeOvers.has(t.commitSeq);
    const ok = t.n === 1 ? t.from === null && t.to === 'admitted' : t.from === prev && t.from !== null && (ownerChange || isLegalRunTransition(t.from, t.to));
    if (!ok) v('legal_transitions', `transition #${t.n} ${t.from ?? '-'} -> ${t.to} is not legal after ${prev ?? 'nothing'}`, { n: t.n, from: t.from, to: t.to, previous: prev });
    prev = t.to;
  }
  if (prev !== null && prev !== r.run.state) v('legal_transitions', `run ${runId} is ${r.run.state} but its last transition went to ${prev}`, { state: r.run.state, last: prev });

  // monotonic sequences
  r.transitions.forEach((t, i) => {
    if (t.n !== i + 1) v('monotonic_sequences', `transition #${t.n} is at position ${i + 1}`, { n: t.n, position: i + 1 });
    const before = r.transitions[i - 1];
    if (before && t.commitSeq < before.commitSeq) v('monotonic_sequences', `transition #${t.n} has commit ${t.commitSeq}, before #${before.n}'s ${before.commitSeq}`, { n: t.n, commitSeq: t.commitSeq, previous: before.commitSeq });
  });
  if (r.run.transitionCount !== r.transitions.length) v('monotonic_sequences', `run ${runId} counts ${r.run.transitionCount} transitions, the log holds ${r.transitions.length}`, { count: r.run.transitionCount, log: r.transitions.length });
  const rising = (what: string, seqs: number[]) => {
    for (let i = 1; i < seqs.length; i++) if (seqs[i]! <= seqs[i - 1]!) return v('monotonic_sequences', `${what} ${seqs[i]} follows ${seqs[i - 1]}`, { what, at: i, seq: seqs[i]!, previous: seqs[i - 1]! });
  };
  rising('commit', r.commits.map((c) => c.seq));
  rising('entry', r.entries.map((e) => e.seq));
  const lastCommit = r.commits.at(-1)?.seq ?? 0;
  const late = r.transitions.filter((t) => t.commitSeq > lastCommit).map((t) => t.n);
  if (late.length) v('monotonic_sequences', `transitions ${late.join(', ')} name commits after the last recorded commit ${lastCommit}`, { transitions: late, lastCommit });

  // never effects at most once
  // One logical action gets a new key only when an operator recorded that it did not happen: a
  // plan step's next generation (`…:g1` after `…:g0`), which leaves the older key failed. So two
  // confirmed generations of one action mean it ran twice. The intent alone says nothing: an agent
  // may run the same command in two turns, two actions each done once.
  const confirmed = new Map<string, string>();
  for (const e of r.effects) {
    if (e.replay !== 'never' || e.status !== 'confirmed') continue;
    const key = `${e.kind} ${logicalAction(e.id)}`;
    const first = confirmed.get(key);
    if (first) v('never_once', `effects ${first} and ${e.id} (replay never) are generations of one action and both confirm it`, { effects: [first, e.id], kind: e.kind, intent: e.intent });
    else confirmed.set(key, e.id);
  }

  // snapshots named by checkpoints exist
  const snaps = new Set(r.isolation.snapshots.map((s) => s.id));
  const named: Array<{ id: string; by: string }> = [];
  for (const s of r.isolation.snapshots) if (s.parentId) named.push({ id: s.parentId, by: `snapshot ${s.id} (parent)` });
  for (const t of r.tasks) {
    const sid = obj(t.result).snapshotId;
    if (typeof sid === 'string') named.push({ id: sid, by: `task ${t.id} result` });
  }
  for (const d of r.documents) {
    for (const value of [d.baseline, ...d.ops.map((o) => o.op)]) {
      const sid = obj(value).snapshotId;
      if (typeof sid === 'string') named.push({ id: sid, by: `document ${d.id} v${d.version}` });
    }
  }
  for (const n of named) if (!snaps.has(n.id)) v('checkpoint_refs_exist', `${n.by} names snapshot ${n.id}, which the record does not hold`, n);

  // tasks named by the run, its tasks and its effects exist: a row deleted by hand leaves the rest
  // of the run reading as whole (the state machine never looks past a missing row)
  const missing: Array<{ id: string; by: string; as: string }> = [];
  if (r.run.rootTaskId && !taskIds.has(r.run.rootTaskId)) missing.push({ id: r.run.rootTaskId, by: `run ${runId}`, as: 'root task' });
  for (const t of r.tasks) if (t.parentId && !taskIds.has(t.parentId)) missing.push({ id: t.parentId, by: `task ${t.id}`, as: 'parent task' });
  for (const e of own) if (e.taskId && !taskIds.has(e.taskId)) missing.push({ id: e.taskId, by: `effect ${e.id}`, as: 'task' });
  for (const m of missing) v('task_refs_exist', `${m.by} names ${m.as} ${m.id}, which the record does not hold`, m);
  return out;
}

/** A plan step key's generation (`…:g1` -> 1), 0 for a key without one. */
function generationOf(effectId: string): number {
  return Number(/:g(\d+)$/.exec(effectId)?.[1] ?? 0);
}

/** The action an effect key names, whatever its generation: `run_1:step:2:g1` -> `run_1:step:2`. */
export function logicalAction(effectId: string): string {
  return effectId.replace(/:g\d+$/, '');
}
