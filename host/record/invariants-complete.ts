import type { Json } from '../model';
import type { RunRecord } from './schema';

type Report = (invariant: 'final_run_settled' | 'record_complete', message: string, evidence: Json) => void;

const FINAL = new Set(['completed', 'failed', 'cancelled', 'compensated']);
const obj = (v: Json | undefined): Record<string, Json> => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});

/**
 * What a record must hold beside the seed's eight rules, found missed by tampering with stored runs
 * one row at a time: a run can end only once its work has (no task still live, and a completed
 * run's root task ended ok), and every row the run's rows name is in the record (a lost task,
 * effect or lease is a hole in its history, whatever the rest says).
 */
export function checkCompleteness(r: RunRecord, v: Report): void {
  const runId = r.run.id;
  const tasks = new Map(r.tasks.map((t) => [t.id, t]));
  const root = r.run.rootTaskId === null ? undefined : tasks.get(r.run.rootTaskId);

  if (FINAL.has(r.run.state)) {
    const live = r.tasks.filter((t) => t.status !== 'terminal').map((t) => ({ task: t.id, kind: t.kind, status: t.status, phase: t.phase }));
    if (live.length) v('final_run_settled', `run ${runId} is ${r.run.state} but task(s) ${live.map((t) => `${t.task} (${t.kind}, ${t.status})`).join(', ')} never ended`, live);
  }
  if (r.run.state === 'completed' && root && (root.status !== 'terminal' || root.outcome !== 'ok')) {
    v('final_run_settled', `run ${runId} is completed but its root task ${root.id} ${root.status === 'terminal' ? `ended ${root.outcome ?? 'with no outcome'}` : `is ${root.status}`}`, { task: root.id, status: root.status, outcome: root.outcome });
  }

  // Plan and agent runs are driven from a root task; the other kinds (a kernel's own test runs) may not be.
  if ((r.run.kind === 'plan' || r.run.kind === 'agent') && (r.run.rootTaskId === null || !root)) {
    v('record_complete', r.run.rootTaskId === null ? `run ${runId} (${r.run.kind}) names no root task` : `run ${runId} names root task ${r.run.rootTaskId}, which the record does not hold`, { rootTaskId: r.run.rootTaskId });
  }
  if (r.run.kind === 'plan' || r.run.kind === 'agent') {
    const bare = r.transitions.filter((t) => !t.versions.kernel || !t.versions.envFingerprint).map((t) => t.n);
    if (bare.length) v('record_complete', `run ${runId}'s transition(s) ${bare.join(', ')} record no kernel version or environment fingerprint`, { transitions: bare });
  }
  for (const t of r.tasks) {
    if (t.parentId !== null && !tasks.has(t.parentId)) v('record_complete', `task ${t.id} (${t.kind}) names parent task ${t.parentId}, which the record does not hold`, { task: t.id, parentId: t.parentId });
  }
  for (const e of r.effects) {
    const own = e.runId === undefined || e.runId === null || e.runId === runId;
    if (own && e.taskId !== null && !tasks.has(e.taskId)) v('record_complete', `effect ${e.id} names task ${e.taskId}, which the record does not hold`, { effect: e.id, taskId: e.taskId });
  }
  const leases = new Set(r.isolation.leases.map((l) => l.id));
  for (const s of r.isolation.snapshots) {
    if (s.runId !== runId) continue;
    if (s.taskId !== null && !tasks.has(s.taskId)) v('record_complete', `snapshot ${s.id} names task ${s.taskId}, which the record does not hold`, { snapshot: s.id, taskId: s.taskId });
    if (!leases.has(s.leaseId)) v('record_complete', `snapshot ${s.id} was taken in sandbox lease ${s.leaseId}, which the record does not hold`, { snapshot: s.id, leaseId: s.leaseId });
  }
  const effects = new Map(r.effects.map((e) => [e.id, e]));
  const settled = (id: string, by: string, evidence: Record<string, Json>) => {
    const e = effects.get(id);
    if (!e) v('record_complete', `${by} ended ok, but its effect ${id} is not in the record`, { ...evidence, effect: id });
    else if (e.status !== 'confirmed' && e.status !== 'compensated') v('record_complete', `${by} ended ok, but its effect ${id} is ${e.status}`, { ...evidence, effect: id, status: e.status });
  };
  // An agent tool call runs under the effect its intent committed (the task's checkpoint names it).
  for (const t of r.tasks) {
    if (t.kind !== 'agent-tool' || t.status !== 'terminal' || obj(t.result).status !== 'ok') continue;
    const id = obj(t.checkpoint).effectId;
    if (typeof id === 'string') settled(id, `tool task ${t.id} (${String(obj(t.input).name)})`, { task: t.id });
  }
  // A plan step that ended ok ran its command under an effect keyed by run, step and generation.
  if (r.run.kind === 'plan') {
    for (const t of r.tasks) {
      if (t.kind !== 'plan-step' || t.status !== 'terminal' || t.outcome !== 'ok') continue;
      // Parked for reconciliation, or rewound to an older snapshot: ended, without having run.
      const res = obj(t.result);
      if (res.reconcile !== undefined || res.rewind !== undefined || res.interrupted !== undefined) continue;
      const { index, generation } = obj(t.input);
      if (typeof index !== 'number') continue;
      // A never step whose effect happened in an earlier generation ends ok without running again, naming that effect.
      const done = res.alreadyDone;
      const key = typeof done === 'string' ? done : `${runId}:step:${index}:g${typeof generation === 'number' ? generation : 0}`;
      settled(key, `step task ${t.id} (step ${index})`, { task: t.id });
    }
  }
}
