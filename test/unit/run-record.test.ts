import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BerthError } from '../../host/errors';
import {
  INVARIANTS,
  RECORD_JSON_SCHEMA_FILE,
  RunRecordSchema,
  checkRecord,
  environmentCanonical,
  recordDigest,
  runRecordJsonSchema,
  sealRecord,
  verifyRecord,
  RECORD_FORMAT,
  RECORD_SCHEMA_VERSION,
  type InvariantName,
  type RunRecord,
} from '../../host/record';

const versions = { kernel: 'berth@0.1.0', envFingerprint: 'sha256:env', imageDigest: 'sha256:img' };
const notRecorded = { recorded: false as const, note: 'n' };

/** A small completed plan run that keeps every invariant. */
function validRecord(): RunRecord {
  const t = (n: number, from: RunRecord['transitions'][number]['from'], to: RunRecord['transitions'][number]['to'], commitSeq: number) => ({ n, at: 1000 + n, actor: 'host:h', from, to, reason: 'r', versions, commitSeq });
  const doc = {
    format: 'berth.run-record', schemaVersion: 1, digest: '', exportedAt: 5000,
    source: { storeId: 'store_x', berth: 'berth 0.1.0', importedFrom: null },
    job: { requestId: 'req_1', submissionId: 'sub_1', submittedAt: 1000, submitter: 'host:h', objective: { steps: [] }, submission: {}, acceptanceRule: { kind: 'command', command: 'true', replay: 'safe', timeoutS: null }, authorityReference: notRecorded },
    run: {
      id: 'run_1', sessionId: 'ses_1', sessionCreatedAt: 1000, sessionMeta: null, kind: 'plan', state: 'completed', rootTaskId: 'task_root', parentRunId: null, forkedFrom: notRecorded,
      transitionCount: 3, versions, handlerKinds: [], models: [], promptDigest: null, createdAt: 1000, updatedAt: 2000,
    },
    transitions: [t(1, null, 'admitted', 1), t(2, 'admitted', 'running', 2), t(3, 'running', 'completed', 4)],
    commits: [1, 2, 3, 4].map((seq) => ({ seq, at: 1000 + seq, label: 'l', actor: 'host:h' })),
    checkpoint: { store: 'sqlite', lastCommittedTransition: 3, lastCommitSeq: 4, resumeRule: 'r' },
    retryAndTimeout: { commandTimeoutS: 60, runBudgetS: 600, leaseTtlS: 60, stepReplay: [], taskAttempts: [] },
    tasks: [
      task('task_root', null, { steps: [] }),
      task('task_step', 'task_root', { step: 'a', snapshotId: 'snap_1' }),
    ],
    effects: [{ id: 'run_1:step:0:g0', taskId: 'task_step', kind: 'plan.step', intent: { step: 'a', run: 'true' }, replay: 'never', status: 'confirmed', attempts: 1, attemptLog: [attempt('run_1:step:0:g0', 1, 'applied', 'reply')], receipt: { exitCode: 0 }, error: null, createdAt: 1, updatedAt: 2, reconciliation: 'receipt' }],
    approvals: [],
    isolation: {
      engine: 'docker', environment: {}, network: { mode: 'none', allow: [] }, secrets: [], limits: {},
      leases: [{ id: 'lease_1', hostId: 'h', containerId: 'c1', imageDigest: 'sha256:img', envFingerprint: 'sha256:env', createdAt: 1, expiresAt: 9, releasedAt: 5, runId: 'run_1' }],
      snapshots: [{ id: 'snap_1', runId: 'run_1', taskId: 'task_step', leaseId: 'lease_1', imageId: 'sha256:i', workspaceDigest: 'sha256:w', sizeBytes: 1, checkpoint: 'step:0:a', parentId: null, commitSeq: 3, createdAt: 3, prunedAt: null }],
    },
    documents: [{ id: 'run_1:sandbox', runId: 'run_1', type: 'plan-sandbox', version: 1, baselineVersion: 0, baseline: { leaseId: null, snapshotId: null, workspaceDigest: null }, ops: [{ version: 1, op: { snapshotId: 'snap_1' } }] }],
    entries: [{ id: 'e1', seq: 1, conversationId: null, taskId: 'task_step', kind: 'plan.step.output', body: {}, commitSeq: 3, at: 3 }],
    egress: [],
    recovery: { restarts: 0, interruptedTasks: [], reconciliations: [], cancellation: [], completionEvidence: null },
    // The acceptance command's verdict, committed with the completion (commit 4).
    acceptance: { verdict: 'accepted', decisions: [{ id: 'acc_1', requestId: 'acceptance-command:run_1', decision: 'accepted', actor: 'acceptance-command', reason: null, evidence: { command: 'true', exitCode: 0 }, at: 1004, commitSeq: 4 }] },
    cost: {
      samples: [{ at: 3, meter: 'cpu.usec', key: 'lease_1', amount: 2_000_000 }],
      summary: { tokens: {}, cpuSeconds: 2, memoryGbSeconds: 0, execs: 1, leaseSeconds: 0.004, snapshotBytes: 1, snapshotGbMonths: 0, approvalWaitSeconds: 0, recovery: { stepsRerun: 0, restores: 0 } },
    },
    artifacts: [{ id: 'art_1', taskId: 'task_step', stepIndex: 0, generation: 0, step: 'a', path: 'out.txt', sizeBytes: 3, sha256: 'ab', snapshotId: 'snap_1', commitSeq: 3, createdAt: 3 }],
    ownership: { owner: null, takeOvers: [] },
    unresolved: [],
  };
  return RunRecordSchema.parse(doc);
}

function attempt(effectId: string, n: number, outcome: 'applied' | 'not_applied', settledBy: 'reply' | 'operator', actor: string | null = null) {
  return { id: `${effectId}#${n}`, n, runId: 'run_1', taskId: 'task_step', epoch: 1, startedAt: 2, endedAt: 3, outcome, settledBy, settledAt: 3, actor, error: null };
}

function task(id: string, parentId: string | null, result: RunRecord['tasks'][number]['result']): RunRecord['tasks'][number] {
  return { id, parentId, kind: parentId ? 'plan-step' : 'plan', kindVersion: 1, status: 'terminal', phase: 'done', checkpoint: null, input: {}, attempts: 1, restarts: 0, wait: null, wakeAt: null, outcome: 'ok', result, error: null, cancelRequested: false, blockedReason: null, version: 3, createdAt: 1, updatedAt: 2 };
}

/** One corruption per invariant: each must be reported by that name. */
const CORRUPT: Record<InvariantName, (r: RunRecord) => void> = {
  completed_with_unresolved: (r) => (r.effects[0]!.status = 'unknown'),
  retry_same_effect: (r) => Object.assign(r.effects[0]!, { attempts: 2, attemptLog: [attempt('run_1:step:0:g0', 1, 'applied', 'reply'), attempt('run_1:step:0:g0', 2, 'applied', 'reply')] }),
  // What the code before issue 27 stored: a count and a status, no attempt and no word of how it was settled.
  settled_provenance: (r) => (r.effects[0]!.attemptLog = []),
  in_flight_owner: (r) => Object.assign(r.effects[0]!, { status: 'executing', taskId: 'task_gone' }),
  resume_verified: (r) => {
    r.tasks[1]!.restarts = 1;
    r.transitions[2]!.versions = { kernel: 'berth@0.1.0' };
  },
  cancel_records_point: (r) => Object.assign(r.tasks[1]!, { outcome: 'cancelled', result: { step: 'a' } }),
  compensation_declared: (r) => Object.assign(r.effects[0]!, { status: 'compensated', receipt: { exitCode: 0 } }),
  sandbox_cleanup_visible: (r) => (r.isolation.leases[0]!.releasedAt = null),
  // A decision committed with the run's start: acceptance rewriting the run's course.
  acceptance_separate: (r) => (r.acceptance.decisions[0]!.commitSeq = 2),
  legal_transitions: (r) => (r.transitions[2]!.from = 'admitted'),
  monotonic_sequences: (r) => (r.transitions[2]!.n = 5),
  never_once: (r) => r.effects.push({ ...r.effects[0]!, id: 'run_1:step:0:g1' }),
  checkpoint_refs_exist: (r) => (r.isolation.snapshots = []),
  // What a cancelled notify run used to say: its root stopped `before`, while its children had sent emails.
  cancel_matches_effects: (r) => Object.assign(r.tasks[0]!, { outcome: 'cancelled', result: { cancelled: { effect: 'before', effectIds: [] } } }),
  // What a cancel of an agent run waiting for an approval used to leave: a final run, an open request.
  approvals_closed: (r) =>
    r.approvals.push({ approvalId: 'apr_1', toolCallId: 'call_0_0', tool: 'exec', scopeDigest: `sha256:${'0'.repeat(64)}`, expiresAt: 10, requestedAt: 1, decision: 'pending', approver: null, decidedAt: null }),
  // A completed run with a step that never ended (found by tampering with a stored run).
  final_run_settled: (r) => (r.tasks[1]!.status = 'running'),
  // The step's task row lost: its effect, snapshot and output name a task the record does not hold.
  record_complete: (r) => (r.tasks = [r.tasks[0]!]),
  // A restarted step that took up the sandbox a killed host left, with no word of what it stopped there.
  sweeps_accounted: (r) =>
    r.entries.unshift({ id: 'e0', seq: 0, conversationId: null, taskId: 'task_step', kind: 'sandbox.verified', body: { how: 'attached', kernel: 'berth@0.1.0', envFingerprint: r.run.versions.envFingerprint ?? 'sha256:x', leaseId: 'lease_1' }, commitSeq: 3, at: 3 }),
};

describe('run invariants (berth check)', () => {
  it('finds nothing wrong with a run that keeps them all', () => {
    expect(checkRecord(validRecord())).toEqual([]);
  });

  for (const name of Object.keys(INVARIANTS) as InvariantName[]) {
    it(`reports ${name} by name, with evidence, when a record breaks it`, () => {
      const r = validRecord();
      CORRUPT[name](r);
      const found = checkRecord(r);
      expect(found.map((v) => v.invariant)).toContain(name);
      const v = found.find((x) => x.invariant === name)!;
      expect(v.runId).toBe('run_1');
      expect(v.message).not.toBe('');
      expect(v.evidence).not.toBeNull();
    });
  }
});

describe('what a record must hold (record_complete)', () => {
  const toolTask = (effectId: string): RunRecord['tasks'][number] => ({ ...task('task_tool', 'task_root', { toolCallId: 'call_0_0', status: 'ok' }), kind: 'agent-tool', checkpoint: { effectId }, input: { name: 'exec', toolCallId: 'call_0_0' } });

  it('accepts an agent tool call that ended ok under its confirmed effect', () => {
    const r = validRecord();
    r.tasks.push(toolTask('run_1:step:0:g0'));
    expect(checkRecord(r).filter((x) => x.invariant === 'record_complete')).toEqual([]);
  });

  it('flags an agent tool call that ended ok whose effect the record does not hold, naming the tool', () => {
    const r = validRecord();
    r.tasks.push(toolTask('run_1:task_tool:call_0_0'));
    const [v] = checkRecord(r).filter((x) => x.invariant === 'record_complete');
    expect(v?.message).toMatch(/tool task task_tool \(exec\) ended ok, but its effect run_1:task_tool:call_0_0 is not in the record/);
  });
});

describe('provenance of settled effects (settled_provenance, retry_same_effect over generations)', () => {
  const found = (r: RunRecord, name: InvariantName) => checkRecord(r).filter((v) => v.invariant === name);
  /** The deploy step said not to have happened (g0) and run again (g1), as today's code records it. */
  function rejectedThenRerun(g0Log: RunRecord['effects'][number]['attemptLog']): RunRecord {
    const r = validRecord();
    const base = r.effects[0]!;
    r.effects = [
      { ...base, id: 'run_1:step:0:g0', status: 'failed', attemptLog: g0Log, receipt: { type: 'operator-decision', decision: 'reject', by: 'user:tester' }, error: { code: 'operator_rejected' }, reconciliation: 'operator_decision' },
      { ...base, id: 'run_1:step:0:g1', attemptLog: [attempt('run_1:step:0:g1', 1, 'applied', 'reply')] },
    ];
    return r;
  }

  it('accepts a never step run again after the operator, named, said its earlier generation did not happen', () => {
    expect(checkRecord(rejectedThenRerun([attempt('run_1:step:0:g0', 1, 'not_applied', 'operator', 'user:tester')]))).toEqual([]);
  });

  it('flags a never step run again after an earlier generation whose "did not happen" has no attempt on record, naming both keys', () => {
    const [v] = found(rejectedThenRerun([]), 'retry_same_effect');
    expect(v?.evidence).toMatchObject({ effect: 'run_1:step:0:g0', next: 'run_1:step:0:g1', attempts: 1, recorded: 0 });
    expect(found(rejectedThenRerun([]), 'settled_provenance').map((x) => (x.evidence as { effect: string }).effect)).toEqual(['run_1:step:0:g0']);
  });

  it('flags a settlement on an operator\'s word that names no operator', () => {
    const [v] = found(rejectedThenRerun([attempt('run_1:step:0:g0', 1, 'not_applied', 'operator', null)]), 'settled_provenance');
    expect(v?.evidence).toMatchObject({ effect: 'run_1:step:0:g0', settledBy: 'operator' });
  });

  it('asks nothing of an effect never attempted (a step refused or cancelled before it began)', () => {
    const r = validRecord();
    Object.assign(r.effects[0]!, { status: 'failed', attempts: 0, attemptLog: [] });
    expect(found(r, 'settled_provenance')).toEqual([]);
  });
});

describe('resume verified over agent tool calls (resume_verified)', () => {
  const only = (r: RunRecord) => checkRecord(r).filter((v) => v.invariant === 'resume_verified');
  const entry = (seq: number, taskId: string, kind: string, body: Record<string, unknown>) => ({ id: `e${seq}`, seq, conversationId: null, taskId, kind, body: body as never, commitSeq: 3, at: 3 });
  const fp = (r: RunRecord) => r.run.versions.envFingerprint ?? 'sha256:x';
  it('accepts two tools restarted together when the first verified the session sandbox and the second found it held', () => {
    const r = validRecord();
    r.entries = [
      entry(1, 't1', 'task.restarted', {}),
      entry(2, 't2', 'task.restarted', {}),
      entry(3, 't1', 'sandbox.verified', { how: 'restored', kernel: 'k', envFingerprint: fp(r), leaseId: 'l2' }),
      entry(4, 't1', 'agent.tool_result', { status: 'ok' }),
      entry(5, 't2', 'agent.tool_result', { status: 'ok' }),
    ];
    expect(only(r)).toEqual([]);
  });
  it('reports a restarted tool whose result came with no verification since its restart, but not one that ended without using the sandbox', () => {
    const r = validRecord();
    r.entries = [
      entry(1, 't0', 'sandbox.verified', { how: 'attached', kernel: 'k', envFingerprint: fp(r), leaseId: 'l1' }),
      entry(2, 't1', 'task.restarted', {}),
      entry(3, 't1', 'agent.tool_result', { status: 'ok' }),
      entry(4, 't2', 'task.restarted', {}),
      entry(5, 't2', 'agent.tool_result', { status: 'denied' }),
    ];
    expect(only(r).map((v) => v.evidence)).toEqual([{ task: 't1', restartEntry: 2, resultEntry: 3 }]);
  });
});

describe('sweeps accounted (sweeps_accounted)', () => {
  const only = (r: RunRecord) => checkRecord(r).filter((v) => v.invariant === 'sweeps_accounted');
  const entry = (seq: number, kind: string, body: Record<string, unknown>) => ({ id: `e${seq}`, seq, conversationId: null, taskId: 'task_step', kind, body: body as never, commitSeq: 3, at: 3 });
  it('accepts a taken-up sandbox whose sweep entry comes first, and a restore that replaced a live sandbox with its removal recorded', () => {
    const r = validRecord();
    const fp = r.run.versions.envFingerprint ?? 'sha256:x';
    r.entries = [
      entry(1, 'sandbox.swept', { what: 'commands', leaseId: 'lease_1', killedProcesses: 2 }),
      entry(2, 'sandbox.verified', { how: 'attached', kernel: 'k', envFingerprint: fp, leaseId: 'lease_1' }),
      entry(3, 'sandbox.swept', { what: 'removed', leaseId: 'lease_1', reason: 'in_flight_safe_step' }),
      entry(4, 'sandbox.verified', { how: 'restored', kernel: 'k', envFingerprint: fp, leaseId: 'lease_2', replaced: { leaseId: 'lease_1', reason: 'x', live: true } }),
    ];
    expect(only(r)).toEqual([]);
  });
  it('reports a restore that replaced a live sandbox without recording its removal, but not one whose sandbox was already gone', () => {
    const r = validRecord();
    const fp = r.run.versions.envFingerprint ?? 'sha256:x';
    r.entries = [
      entry(1, 'sandbox.verified', { how: 'restored', kernel: 'k', envFingerprint: fp, leaseId: 'lease_2', replaced: { leaseId: 'lease_1', reason: 'gone' } }),
      entry(2, 'sandbox.verified', { how: 'restored', kernel: 'k', envFingerprint: fp, leaseId: 'lease_3', replaced: { leaseId: 'lease_2', reason: 'caught', live: true } }),
    ];
    expect(only(r).map((v) => v.evidence)).toEqual([expect.objectContaining({ lease: 'lease_2', how: 'restored' })]);
  });
});

describe('acceptance apart from completion (acceptance_separate)', () => {
  const only = (r: RunRecord) => checkRecord(r).filter((v) => v.invariant === 'acceptance_separate').map((v) => v.message);
  it('does not call two agent tool calls that ran the same never command in two turns a double execution', () => {
    // Before: never_once keyed on kind and intent, so the same command in two turns (two effects, each done once) was flagged.
    const r = validRecord();
    const call = (turn: number) => ({ ...r.effects[0]!, id: `run_1:task_tool${turn}:call_${turn}_0`, kind: 'tool.exec', intent: { tool: 'exec', args: { command: 'make deploy' } } });
    r.effects = [call(0), call(1)];
    expect(checkRecord(r).filter((x) => x.invariant === 'never_once')).toEqual([]);
  });

  it('reports a verdict the decisions do not give: acceptance implied by the run state', () => {
    const r = validRecord();
    r.acceptance.decisions = [];
    expect(only(r)).toEqual([expect.stringContaining('records acceptance accepted but its decisions say pending')]);
  });
  it('reports a decision on a run that is not completed', () => {
    const r = validRecord();
    r.run.state = 'failed';
    r.transitions[2]!.to = 'failed';
    expect(only(r)).toEqual(expect.arrayContaining([expect.stringContaining('is failed but has 1 acceptance decision')]));
  });
  it('accepts an operator decision in its own commit after completion, overruling the command', () => {
    const r = validRecord();
    r.commits.push({ seq: 5, at: 1005, label: 'acceptance.rejected', actor: 'user:ann' });
    r.checkpoint.lastCommitSeq = 5;
    r.acceptance = { verdict: 'rejected', decisions: [...r.acceptance.decisions, { id: 'acc_2', requestId: 'r2', decision: 'rejected', actor: 'user:ann', reason: 'wrong', evidence: { by: 'operator' }, at: 1005, commitSeq: 5 }] };
    expect(checkRecord(r)).toEqual([]);
  });
});

describe('run record files', () => {
  it('carries the digest of its canonical form: key order and whitespace do not matter, a changed value does', () => {
    const { text, digest } = sealRecord(validRecord() as unknown as Record<string, unknown>);
    const doc = JSON.parse(text) as Record<string, unknown>;
    expect(doc.digest).toBe(digest);
    expect(recordDigest(doc)).toBe(digest);
    // canonical: sorted keys, no whitespace
    expect(text.startsWith('{"acceptance":{"decisions":[{"actor":"acceptance-command","at":1004,"commitSeq":4,')).toBe(true);
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(doc).reverse()), null, 2);
    expect(verifyRecord(reordered).digest).toBe(digest);
    const changed = text.replace('"attempts":1', '"attempts":7');
    expect(() => verifyRecord(changed)).toThrow(expect.objectContaining({ code: 'record_digest_mismatch' }) as BerthError);
  });

  it('refuses an unknown schema version and a document that is no record', () => {
    const { text } = sealRecord(validRecord() as unknown as Record<string, unknown>);
    expect(() => verifyRecord(text.replace('"schemaVersion":1', '"schemaVersion":99'))).toThrow(expect.objectContaining({ code: 'record_version_unknown' }) as BerthError);
    expect(() => verifyRecord(text.slice(0, -10))).toThrow(expect.objectContaining({ code: 'record_unreadable' }) as BerthError);
  });

  it('publishes a JSON Schema equal to what the zod schema generates now (run npx tsx host/record/write-json-schema.ts)', () => {
    const committed = readFileSync(join(import.meta.dirname, '../..', RECORD_JSON_SCHEMA_FILE), 'utf8');
    expect(committed).toBe(runRecordJsonSchema());
  });
});

describe('canonical JSON', () => {
  it('is the same text as the environment fingerprint\'s canonical form, keys sorted at every depth', async () => {
    const { canonicalJson, environmentCanonical } = await import('../../host/record');
    const value = { b: [3, { z: 1, a: null, m: 'x"y' }], a: { d: true, c: 'é\u2028' }, é: 1, B: 2, _: [] };
    expect(canonicalJson(value)).toBe(environmentCanonical(value));
    expect(canonicalJson(value)).toBe('{"B":2,"_":[],"a":{"c":"é\u2028","d":true},"b":[3,{"a":null,"m":"x\\"y","z":1}],"é":1}');
  });
});

describe('canonical JSON fast path', () => {
  it('gives the canonical text for values already sorted, unsorted deep down, and with toJSON', async () => {
    const { canonicalJson, environmentCanonical } = await import('../../host/record');
    const values: unknown[] = [
      { a: 1, b: { c: [1, { d: 2, e: 'x' }] } },
      { a: 1, b: { c: [1, { e: 2, d: 'x' }] } },
      { a: { toJSON: () => ({ z: 1, y: 2 }) } },
      [null, 'x', 3, [{ b: 1, a: 2 }]],
    ];
    for (const v of values) expect(canonicalJson(v)).toBe(environmentCanonical(JSON.parse(JSON.stringify(v))));
  });
});

describe('canonical JSON of number-like keys', () => {
  it('orders integer-like object keys by UTF-16 code unit like every other key, though JavaScript lists them first in numeric order', async () => {
    const { canonicalJson, recordDigest, environmentCanonical } = await import('../../host/record');
    // Exit codes, line numbers and HTTP statuses are common keys in entry bodies and receipts.
    const values: unknown[] = [
      { '10': 'a', '9': 'b' },
      { b: 1, '2': 2, a: { '100': 1, '20': 2, x: 3 } },
      { '-1': 'neg', '1': 'pos', ' ': 'space' },
      [{ '3': 1, '12': 2 }],
      { z: { toJSON: () => ({ '11': 1, '5': 2 }) } },
    ];
    for (const v of values) expect(canonicalJson(v)).toBe(environmentCanonical(JSON.parse(JSON.stringify(v))));
    expect(canonicalJson({ '10': 'a', '9': 'b' })).toBe('{"10":"a","9":"b"}');
    // The digest follows the canonical text, whatever order the document was parsed in.
    const a = JSON.parse('{"format":"x","body":{"9":1,"10":2}}') as Record<string, unknown>;
    const b = JSON.parse('{"body":{"10":2,"9":1},"format":"x"}') as Record<string, unknown>;
    expect(recordDigest(a)).toBe(recordDigest(b));
  });

  it('still imports a record exported before the fix, whose digest covers integer-like keys in JavaScript\'s order; an altered one is still refused', async () => {
    const { sha256 } = await import('../../host/record');
    const doc = validRecord();
    doc.entries[0]!.body = { exitCodes: { '10': 'b', '9': 'a' } };
    const { text } = sealRecord(doc as unknown as Record<string, unknown>);
    const { digest: _d, ...members } = JSON.parse(text) as Record<string, unknown>;
    // The text the earlier build hashed: the same members with "9" before "10".
    const oldText = JSON.stringify(members, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]])) : v));
    expect(oldText).toContain('{"9":"a","10":"b"}');
    const old = JSON.stringify({ ...members, digest: sha256(oldText) });
    expect(verifyRecord(old).digest).toBe(sha256(oldText));
    expect(() => verifyRecord(old.replace('"9":"a"', '"9":"c"'))).toThrow(expect.objectContaining({ code: 'record_digest_mismatch' }) as BerthError);
  });

  it('keeps the text, and so the digest, of a value without integer-like keys as before', async () => {
    const { canonicalJson } = await import('../../host/record');
    const v = { b: [3, { z: 1, a: null }], a: { d: true, c: 'x' }, k1: 1, '1k': 2, 'a-1': 3 };
    expect(canonicalJson(v)).toBe('{"1k":2,"a":{"c":"x","d":true},"a-1":3,"b":[3,{"a":null,"z":1}],"k1":1}');
  });
});

describe('contract fields from a host\'s registry', () => {
  it('give every built-in task kind\'s retry budget and restart limit (the kernel\'s defaults where a handler sets none), and recorded:false for a kind the host does not run', async () => {
    const { HandlerRegistry } = await import('../../host/kernel');
    const { contractFields, registeredPolicies } = await import('../../host/record');
    const registry = new HandlerRegistry();
    registry.register({ kind: 'k.own', version: 1, initialPhase: 'a', phases: { a: async () => ({ type: 'complete', result: null }) }, maxRetries: 6, restartLimit: 2 });
    registry.register({ kind: 'k.default', version: 1, initialPhase: 'a', phases: { a: async () => ({ type: 'complete', result: null }) } });
    const task = (kind: string, kindVersion: number) => ({ id: kind, kind, kindVersion, createdAt: 0 });
    const rows = { run: { kind: 'x', rootTaskId: 'none' }, tasks: [task('k.own', 1), task('k.default', 1), task('k.gone', 1)], effects: [], snapshots: [], leases: [], transitions: [] };
    const c = contractFields(rows as never, registeredPolicies(registry));
    expect(c.retry.map(({ backoff: _b, ...k }) => k)).toEqual([
      { kind: 'k.own', version: 1, maxRetries: 6, restartLimit: 2 },
      { kind: 'k.default', version: 1, maxRetries: 3, restartLimit: 5 },
      { kind: 'k.gone', version: 1, maxRetries: { recorded: false, note: expect.stringContaining('k.gone@1') }, restartLimit: { recorded: false, note: expect.stringContaining('--extension') } },
    ]);
  });
});

describe('contract fields', () => {
  it('give the handler\'s retry budget and restart limit when the exporting process knows the task kind, and recorded:false naming the kind when it does not', async () => {
    const { tempStore } = await import('../support/temp-store');
    const { exportRun, RunRecordSchema } = await import('../../host/record');
    const t = tempStore();
    try {
      await t.store.commit({ sessionId: 's', label: 'l', createSession: {}, runs: [{ id: 'r', kind: 'notify', submissionId: null, rootTaskId: 't', versions: { kernel: 'berth@0.1.0' } }], tasks: [{ id: 't', runId: 'r', parentId: null, kind: 'notify.send', kindVersion: 2, phase: 'start', input: {} }] });
      await t.store.commit({ sessionId: 's', label: 'go', runTransitions: [{ runId: 'r', from: 'admitted', to: 'running', actor: 'host:x', reason: 'go' }] });
      const known = (await exportRun(t.store, 'r', 1, { policies: (kind, version) => (kind === 'notify.send' && version === 2 ? { maxRetries: 5, restartLimit: 10 } : undefined) })).record;
      expect(RunRecordSchema.parse(known).contract!.retry).toEqual([{ kind: 'notify.send', version: 2, maxRetries: 5, restartLimit: 10, backoff: expect.stringContaining('2^attempt') }]);
      // an application kind has its versions per transition too
      expect(known.contract!.transitionVersions.map((v) => [v.n, v.versions.kernel, v.taskKinds])).toEqual([
        [1, 'berth@0.1.0', [{ kind: 'notify.send', version: 2 }]],
        [2, 'berth@0.1.0', [{ kind: 'notify.send', version: 2 }]],
      ]);
      expect(known.contract!.dependencyFailure).toMatchObject({ recorded: false });
      const unknown = (await exportRun(t.store, 'r', 1)).record;
      expect(unknown.contract!.retry[0]!.maxRetries).toEqual({ recorded: false, note: expect.stringContaining('notify.send@2') });
    } finally {
      await t.cleanup();
    }
  });
});

describe('exported entries', () => {
  it('are written in the same canonical text as the generic serialiser, large bodies left out by digest', async () => {
    const { tempStore } = await import('../support/temp-store');
    const { exportRun, recordDigest } = await import('../../host/record');
    const t = tempStore();
    try {
      await t.store.commit({ sessionId: 's', label: 'l', createSession: {}, runs: [{ id: 'r', kind: 'bench', submissionId: null, rootTaskId: null, versions: {} }] });
      await t.store.commit({ sessionId: 's', label: 'l', entries: [
        { id: 'e1', runId: 'r', kind: 'k', body: { z: 1, a: { y: 'é"', b: [2, { d: 1, c: 0 }] } } },
        { id: 'e2', runId: 'r', kind: 'k', body: { big: 'x'.repeat(20_000) } },
      ] });
      const { text, record } = await exportRun(t.store, 'r', 1);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      // the reference: environment's canonical form
      expect(text).toBe(`${environmentCanonical(parsed)}\n`);
      expect(recordDigest(parsed)).toBe(record.digest);
      expect(record.entries[1]!.body).toEqual({ omitted: true, digest: expect.stringMatching(/^sha256:/), bytes: 20_010 });
      expect(text).not.toContain('x'.repeat(100));
    } finally {
      await t.cleanup();
    }
  });
});

describe('an imported run', () => {
  it('is listed as a fork of the run its record names as parent', async () => {
    const { tempStore } = await import('../support/temp-store');
    const { recordRows } = await import('../../host/record');
    const t = tempStore();
    try {
      const r = validRecord();
      r.run.parentRunId = 'run_0';
      r.run.forkedFrom = { runId: 'run_0', snapshotId: 'snap_0', checkpoint: 'step:0:a', index: 1 };
      await t.store.importRun(recordRows(r, 'test'), 1);
      expect((await t.store.listForks('run_0')).map((f) => f.id)).toEqual(['run_1']);
      expect(await t.store.listForks('run_1')).toEqual([]);
    } finally {
      await t.cleanup();
    }
  });

  it('is left alone by the release of ended runs\' sandboxes: its leases are another store\'s record', async () => {
    const { tempStore } = await import('../support/temp-store');
    const { recordRows } = await import('../../host/record');
    const { releaseEndedRunLeases } = await import('../../host/runtime/run-end-leases');
    const t = tempStore();
    try {
      const r = validRecord();
      r.isolation.leases[0]!.releasedAt = null;
      await t.store.importRun(recordRows(r, 'test'), 1);
      const asked: boolean[] = [];
      const sandbox = {
        releaseLeases: async (pick: (l: { runId: string | null }) => Promise<boolean>) => {
          for (const l of await t.store.listLeases({})) asked.push(await pick(l));
          return [];
        },
      };
      await releaseEndedRunLeases({ store: t.store, sandbox: sandbox as never, logger: undefined as never });
      expect(asked).toEqual([false]);
      // and the store refuses to advance it
      await expect(t.store.commit({ sessionId: 'ses_1', label: 'x', entries: [{ id: 'e9', kind: 'k', body: 1 }] })).rejects.toMatchObject({ code: 'run_imported' });
    } finally {
      await t.cleanup();
    }
  });
});

describe('what a restart and an attempt must show (berth check)', () => {
  const restartEntry = { id: 'e0', seq: 1, conversationId: null, taskId: 'task_step', kind: 'task.restarted', body: { taskId: 'task_step', phase: 'run', restarts: 1 }, commitSeq: 3, at: 3 };
  const verified = (envFingerprint: string) => ({ id: 'ev', seq: 2, conversationId: null, taskId: 'task_step', kind: 'sandbox.verified', body: { how: 'attached', kernel: '0.1.0', envFingerprint }, commitSeq: 3, at: 3 });
  const withEntries = (entries: RunRecord['entries']) => {
    const r = validRecord();
    r.tasks[1]!.restarts = 1;
    r.entries = [...entries, { ...r.entries[0]!, seq: 3 }];
    return checkRecord(r).filter((v) => v.invariant === 'resume_verified').map((v) => v.message);
  };

  it('a restarted step whose output follows no verification of its sandbox is resume_verified; one that verified the run\'s environment is not', () => {
    expect(withEntries([restartEntry])).toEqual([expect.stringContaining('no record of verifying its sandbox')]);
    expect(withEntries([restartEntry, verified('sha256:env')])).toEqual([]);
    expect(withEntries([restartEntry, verified('sha256:other')])).toEqual([expect.stringContaining('not the run\'s sha256:env')]);
  });

  it('a never effect attempted again is a blind repeat unless every earlier attempt was proven not applied', () => {
    const attempt = (n: number, outcome: 'not_applied' | 'unknown' | 'applied') => ({ id: `x#${n}`, n, runId: 'run_1', taskId: 'task_step', epoch: 1, startedAt: n, endedAt: n, outcome, settledBy: outcome === 'unknown' ? null : ('reply' as const), settledAt: n, actor: null, error: outcome === 'not_applied' ? { code: 'refused' } : null });
    const judge = (log: ReturnType<typeof attempt>[]) => {
      const r = validRecord();
      Object.assign(r.effects[0]!, { attempts: log.length, attemptLog: log, error: null });
      return checkRecord(r).filter((v) => v.invariant === 'retry_same_effect').length;
    };
    expect(judge([attempt(1, 'not_applied'), attempt(2, 'applied')])).toBe(0);
    expect(judge([attempt(1, 'unknown'), attempt(2, 'applied')])).toBe(1);
  });
});

describe('a record file from outside', () => {
  it('nested thousands of levels deep is record_unreadable naming where, not a stack overflow reported as an internal error', () => {
    const deep = `${'{"x":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    const text = `{"format":"${RECORD_FORMAT}","schemaVersion":${RECORD_SCHEMA_VERSION},"digest":"sha256:0","entries":[{"body":${deep}}]}`;
    // Before: RangeError "Maximum call stack size exceeded" from the digest's canonical form (berth import said "internal error").
    let thrown: unknown;
    try {
      verifyRecord(text, 'deep.json');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BerthError);
    expect(thrown).toMatchObject({ code: 'record_unreadable', message: 'deep.json is not a run record Berth wrote: it nests deeper than 1000 levels of arrays and objects at $.entries[0].body.x.x.x…' });
  });
});
