import { createReadStream, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { BerthError } from '../../errors';
import { hostRuntime } from '../../api/runtime';
import { checkStore, exportRunToFile, importRecord, INVARIANTS, registeredPolicies, removeStalePartials } from '../../record';
import type { CliContext } from '../context';
import { isFinalRunState } from '../../model';
import { emit } from '../output';

/**
 * `berth export RUN [--out FILE]`: the run record, canonical JSON with its digest, to FILE or stdout.
 * Written while the run's rows are read page by page (a run of any length exports in bounded
 * memory); to stdout through a temporary file, since the digest is written last.
 */
export async function exportCommand(ctx: CliContext, runId: string, out: string | undefined): Promise<number> {
  // The retry budget of every task kind this host can run (built-in and --extension kinds); the store keeps only the kind.
  const { registry } = hostRuntime(ctx, { claim: 'none' });
  const policies = registeredPolicies(registry);
  if (!out) {
    // Named by this process, so that the next export removes what one killed before its cleanup left.
    removeStalePartials(tmpdir(), 'berth-export-', { random: true });
    const dir = mkdtempSync(join(tmpdir(), `berth-export-${process.pid}-`));
    try {
      const file = join(dir, 'record.json');
      await exportRunToFile(ctx.store, runId, ctx.clock.now(), file, { policies });
      await pipeline(createReadStream(file), process.stdout, { end: false });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return 0;
  }
  refuseStoreFile(ctx.store.location, out, runId);
  // A run that has not ended is exported as it is now: said, so the file is not taken for its end.
  // Read first: a run final then is final in the record (a final state never changes).
  const state = (await ctx.store.getRun(runId))?.state;
  const { digest, bytes } = await exportRunToFile(ctx.store, runId, ctx.clock.now(), out, { policies });
  const unfinished = state !== undefined && !isFinalRunState(state);
  emit(ctx.json, { runId, file: out, digest, bytes, state: state ?? null, final: !unfinished }, () =>
    `exported run ${runId} to ${out} (${digest})${unfinished ? `; the run is ${state}, not ended: the record is as it stands now (export it again once it ends)` : ''}`,
  );
  return 0;
}

/** `path` with its directory's links resolved (and its own, when it exists): two spellings of one file compare equal. */
function canonicalPath(path: string): string {
  const abs = resolve(path);
  try {
    return realpathSync(abs);
  } catch {
    try {
      return join(realpathSync(dirname(abs)), basename(abs));
    } catch {
      return abs;
    }
  }
}

/**
 * The record is written beside `out` and renamed over it: named the SQLite store (a slip for
 * --store), or its WAL, it would replace every run's history with one run's record.
 */
function refuseStoreFile(location: string, out: string, runId: string): void {
  if (/^postgres(ql)?:\/\//.test(location)) return;
  const store = canonicalPath(location);
  const target = canonicalPath(out);
  const inode = (p: string) => statSync(p, { throwIfNoEntry: false });
  const [a, b] = [inode(target), inode(store)];
  const same = ['', '-wal', '-shm', '-journal'].some((suffix) => target === `${store}${suffix}`) || (a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino);
  if (same) throw new BerthError('output_unwritable', `cannot write the record to ${out}: it is the store (${location}) or a file of it; name another file, such as ${runId}.json`, { ids: { runId }, details: { file: out } });
}

/** `berth import FILE`: verifies the record (schema version, digest) and loads it as a read-only run. */
export async function importCommand(ctx: CliContext, file: string): Promise<number> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'it does not exist' : code === 'EISDIR' ? 'it is a directory, not a record file (berth export RUN --out FILE writes one)' : code === 'EACCES' ? 'no permission to read it' : (err as Error).message;
    throw new BerthError('record_unreadable', `cannot read ${file}: ${why}`, { details: { file, errno: code ?? null } });
  }
  const r = await importRecord(ctx.store, text, file, ctx.clock.now());
  await markImporter(ctx);
  emit(ctx.json, r, () => `imported run ${r.runId} (${r.digest}) into ${ctx.store.location}: read-only (berth show ${r.runId}, berth check ${r.runId})`);
  return 0;
}

/** `berth check [RUN | --all]`: exit 1 naming each violated invariant with its evidence. */
export async function checkCommand(ctx: CliContext, runId: string | undefined, all: boolean): Promise<number> {
  if (!runId && !all) throw new BerthError('usage', 'berth check needs RUN or --all');
  if (runId && all) throw new BerthError('usage', `berth check takes RUN or --all, not both (berth check ${runId} checks that run, berth check --all every run)`);
  const r = await checkStore(ctx.store, runId ? [runId] : 'all', ctx.clock.now());
  const ok = r.violations.length === 0 && r.unreadable.length === 0;
  emit(ctx.json, { ...r, ok }, () =>
    ok
      ? `${r.checked} run(s) checked: every invariant holds (${Object.keys(INVARIANTS).length} invariants)`
      : [
          `${r.checked} run(s) checked: ${r.violations.length} violation(s)${r.unreadable.length ? `, ${r.unreadable.length} run(s) with unreadable rows` : ''}`,
          ...r.unreadable.map((u) => `  ${u.runId}: its stored rows cannot be read (${u.code}): ${u.message}`),
          ...r.violations.map((v) => `  ${v.invariant}: ${v.runId}: ${v.message}\n    evidence: ${JSON.stringify(v.evidence)}`),
        ].join('\n'),
  );
  if (!ctx.json && r.violations.length) process.stderr.write(`berth: ${r.violations.length} invariant violation(s): ${[...new Set(r.violations.map((v) => v.invariant))].join(', ')}\n`);
  if (!ctx.json && r.unreadable.length) process.stderr.write(`berth: run(s) with unreadable rows: ${r.unreadable.map((u) => u.runId).join(', ')}\n`);
  return ok ? 0 : 1;
}

/**
 * The imported run's snapshot images and tags on this engine carry the exporting store's labels
 * only: this store's marker lets `berth gc --orphans` read its records before removing them once
 * that store is deleted. Without an engine there is nothing to mark (nor to remove).
 */
async function markImporter(ctx: CliContext): Promise<void> {
  try {
    await ctx.sandbox.markStore();
  } catch (err) {
    ctx.logger.debug({ err }, 'no store marker left on the engine');
  }
}
