import { BerthError } from '../errors';
import { deeperThan } from '../support/json-depth';
import type { Store } from '../store';
import type { ImportRows } from '../store';
import { legacyRecordDigest, recordDigest } from './canonical';
import { RECORD_FORMAT, RECORD_SCHEMA_VERSION, RunRecordSchema, type RunRecord } from './schema';

/** The deepest nesting of arrays and objects a record file may have. */
const MAX_RECORD_DEPTH = 1_000;

/**
 * Reads an exported record and proves it is one this build understands and that nobody changed:
 * the format and schema version first (`record_version_unknown`), then the digest of its
 * canonical form (`record_digest_mismatch`), then the schema (`record_invalid`).
 */
export function verifyRecord(text: string, file = 'the record'): RunRecord {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new BerthError('record_unreadable', `${file} is not JSON (${(err as Error).message}); it was truncated or altered`, { details: { file } });
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new BerthError('record_unreadable', `${file} is not a run record (not a JSON object)`, { details: { file } });
  // Far deeper than any record Berth writes (its own structure is a few levels; a tool call's
  // arguments are bounded by their tool's schema), far shallower than the stack of the walks below.
  const deep = deeperThan(doc, MAX_RECORD_DEPTH);
  if (deep) throw new BerthError('record_unreadable', `${file} is not a run record Berth wrote: it nests deeper than ${MAX_RECORD_DEPTH} levels of arrays and objects at ${deep}`, { details: { file, at: deep } });
  const d = doc as Record<string, unknown>;
  // No format at all: some other JSON file, not a record of another version.
  if (d.format === undefined) throw new BerthError('record_unreadable', `${file} is not a run record: it has no "format" field (a record from berth export has "format": "${RECORD_FORMAT}")`, { details: { file } });
  if (d.format !== RECORD_FORMAT) throw new BerthError('record_version_unknown', `${file} has format ${JSON.stringify(d.format)}, expected "${RECORD_FORMAT}"`, { details: { file, format: d.format } });
  if (d.schemaVersion !== RECORD_SCHEMA_VERSION) {
    throw new BerthError('record_version_unknown', `${file} is schema version ${JSON.stringify(d.schemaVersion)}; this berth reads version ${RECORD_SCHEMA_VERSION}`, { details: { file, schemaVersion: d.schemaVersion } });
  }
  const computed = recordDigest(d);
  // A record exported before integer-like keys were ordered by code unit carries that build's digest.
  if (d.digest !== computed && d.digest !== legacyRecordDigest(d)) {
    throw new BerthError('record_digest_mismatch', `${file} says its digest is ${String(d.digest)} but its content hashes to ${computed}: it was altered after export`, { details: { file, recorded: d.digest, computed } });
  }
  const parsed = RunRecordSchema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new BerthError('record_invalid', `${file} does not match run record version ${RECORD_SCHEMA_VERSION}: ${issue.path.join('.') || '(root)'}: ${issue.message}`, { details: { file } });
  }
  return parsed.data;
}

/** The store rows an exported record stands for (the inverse of exportRun's mapping). */
export function recordRows(r: RunRecord, source: string): ImportRows {
  const runId = r.run.id;
  const sub = r.job.submission;
  return {
    digest: r.digest,
    source,
    session: { id: r.run.sessionId, createdAt: r.run.sessionCreatedAt, lastSeq: r.checkpoint.lastCommitSeq, meta: r.run.sessionMeta },
    commits: r.commits,
    submission:
      r.job.submissionId && r.job.requestId
        ? { id: r.job.submissionId, sessionId: r.run.sessionId, requestId: r.job.requestId, runId, input: sub, createdAt: r.job.submittedAt ?? r.run.createdAt }
        : null,
    forkedFromRunId: r.run.parentRunId,
    run: {
      id: runId, sessionId: r.run.sessionId, submissionId: r.job.submissionId, kind: r.run.kind, state: r.run.state, rootTaskId: r.run.rootTaskId,
      transitionCount: r.run.transitionCount, versions: r.run.versions, createdAt: r.run.createdAt, updatedAt: r.run.updatedAt,
    },
    transitions: r.transitions,
    tasks: r.tasks,
    effects: r.effects.map(({ reconciliation: _r, runId: _o, ...e }) => e),
    entries: r.entries,
    documents: r.documents,
    snapshots: r.isolation.snapshots,
    leases: r.isolation.leases,
    egress: r.egress,
    acceptance: r.acceptance.decisions,
    costSamples: r.cost.samples,
    artifacts: Array.isArray(r.artifacts) ? r.artifacts : [],
    owner: r.ownership.owner ? { sessionId: r.run.sessionId, ...r.ownership.owner } : null,
  };
}

/** `berth import`: verifies the record and loads it as a read-only run; returns the run id. */
export async function importRecord(store: Store, text: string, file: string, now: number): Promise<{ runId: string; digest: string }> {
  const record = verifyRecord(text, file);
  await refuseHeldRun(store, record);
  await store.importRun(recordRows(record, `${record.source.storeId}:${file}`), now);
  return { runId: record.run.id, digest: record.digest };
}

/**
 * A record of a run the store already holds is not a conflict of ids to list one by one (every
 * task, entry and snapshot of it collides): it is the same run, so say which copy is there.
 */
async function refuseHeldRun(store: Store, record: RunRecord): Promise<void> {
  const runId = record.run.id;
  const ids = { runId, sessionId: record.run.sessionId };
  const existing = await store.getImportedRun(runId);
  if (existing) {
    const same = existing.digest === record.digest ? 'the same record (same digest): nothing to import' : `another record of it (digest ${existing.digest}; this one is ${record.digest}): a store keeps one record per run, so import this one into another store`;
    throw new BerthError('import_conflict', `run ${runId} is already in this store as an imported record (${store.location}, from ${existing.source}), ${same}; berth show ${runId}`, {
      ids,
      details: { already: 'imported', digest: existing.digest, source: existing.source },
    });
  }
  if (await store.getRun(runId)) {
    throw new BerthError('import_conflict', `run ${runId} is already in this store as a live run (${store.location}): its record was exported from here; nothing to import (berth show ${runId}, berth export ${runId} --out FILE)`, {
      ids,
      details: { already: 'live' },
    });
  }
}
