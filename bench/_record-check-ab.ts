/**
 * record: the check path (an unsealed record per run) against the old one (export each run, then
 * check its record), interleaved five times over the same 1,000 stored runs: `npx tsx bench/_record-check-ab.ts`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkStore, exportRun } from '../host/record';
import { checkRecord } from '../host/record/invariants';
import { openSqliteStore } from '../host/store';
const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'pc-')), 's.db'));
for (let i = 1; i <= 1000; i++) {
  const sessionId = `ses_${i}`; const runId = `run_${i}`;
  const versions = { kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' };
  await store.commit({ sessionId, label: 'submit', createSession: { meta: { name: 'bench' } }, runs: [{ id: runId, kind: 'bench', submissionId: null, rootTaskId: `task_${i}`, versions }], tasks: [{ id: `task_${i}`, runId, parentId: null, kind: 'k', kindVersion: 1, phase: 'start', input: { i } }] });
  await store.commit({ sessionId, label: 'start', runTransitions: [{ runId, from: 'admitted', to: 'running', actor: 'host:b', reason: 'go' }] });
  const effect = { id: `eff_${i}`, create: { runId, taskId: `task_${i}`, kind: 'bench.send', intent: { i }, replay: 'never' as const } };
  await store.commit({ sessionId, label: 'effect.begin', effects: [{ ...effect, set: { status: 'executing', attempts: 1 } }] });
  await store.commit({ sessionId, label: 'effect.fail', effects: [{ id: effect.id, expectStatus: 'executing', set: { status: 'intended', error: { code: 'refused', delivery: 'not_sent' } } }] });
  await store.commit({ sessionId, label: 'effect.begin', effects: [{ id: effect.id, expectStatus: 'intended', set: { status: 'executing', attempts: 2 } }] });
  await store.commit({ sessionId, label: 'effect.done', effects: [{ id: effect.id, expectStatus: 'executing', set: { status: 'confirmed', receipt: { id: i } } }] });
  await store.commit({ sessionId, label: 'out', entries: Array.from({length: 5}, (_, k) => ({ id: `ent_${i}_${k}`, kind: 'plan.step.output', runId, body: { line: k, text: `output line ${k} of a step that prints a fair amount` } })) });
  await store.commit({ sessionId, label: 'end', runTransitions: [{ runId, from: 'running', to: 'completed', actor: 'host:b', reason: 'done' }] });
}
const ids = Array.from({ length: 1000 }, (_, i) => `run_${i + 1}`);
const ratios: number[] = [];
for (let k = 0; k < 5; k++) {
  let t = performance.now(); await checkStore(store, ids, Date.now()); const nw = performance.now() - t;
  t = performance.now(); for (const id of ids) checkRecord((await exportRun(store, id, Date.now())).record); const old = performance.now() - t;
  ratios.push(old / nw);
  console.log(`new ${(1000 / (nw / 1000)).toFixed(0)} runs/s  old (export+check) ${(1000 / (old / 1000)).toFixed(0)} runs/s  old/new ${(old / nw).toFixed(2)}  load ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')}`);
}
console.log('median old/new', ratios.sort()[2]!.toFixed(2));
