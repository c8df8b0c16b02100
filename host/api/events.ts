import { BerthError } from '../errors';
import type { Run, RunState } from '../model';
import type { LoggedCommit, Store } from '../store';
import { AttemptTracker, type FollowedOutput } from '../output';
import { SETTLED } from './drive';

/** One committed change of a run's session, in store-wide commit order; `seq` resumes a follow. */
export interface RunEvent extends LoggedCommit {
  type: 'commit';
  /** The run's state after this commit was read (it may have moved on by the time it is seen). */
  state: RunState;
}

export interface FollowOptions {
  /** Resume after this store-wide sequence (the last `seq` seen); default 0, from the start. */
  afterSeq?: number;
  signal?: AbortSignal;
  /** How often the store is asked for new commits (default 100 ms). */
  pollMs?: number;
  /** Keep following after the run settles (until the signal aborts); default false. */
  forever?: boolean;
  /**
   * Also the run's live output (host/output), chunk by chunk while its steps and tool calls run,
   * with an `interrupted` event for an attempt a crash cut off. Default false.
   */
  output?: boolean;
  /** With `output`: resume after this output sequence (the last output event's `seq`). */
  afterOutputSeq?: number;
}

/** What a follow with `output: true` yields: commits, output chunks and interruptions, each in its own order. */
export type RunOrOutputEvent = RunEvent | FollowedOutput;

const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * The commits of a run's session from the store's commit log, oldest first, as they land. Ends
 * once the run has settled and every commit up to then was yielded (or when `signal` aborts). A
 * follower that stopped resumes with `afterSeq` set to the last `seq` it saw and misses nothing.
 */
export function followRun(store: Store, runId: string, o: FollowOptions & { output: true }): AsyncGenerator<RunOrOutputEvent>;
export function followRun(store: Store, runId: string, o?: FollowOptions): AsyncGenerator<RunEvent>;
export async function* followRun(store: Store, runId: string, o: FollowOptions = {}): AsyncGenerator<RunOrOutputEvent> {
  const first = await store.getRun(runId);
  if (!first) throw new BerthError('run_not_found', `no run ${runId} in ${store.location}`, { ids: { runId } });
  let after = o.afterSeq ?? 0;
  let afterOutput = o.afterOutputSeq ?? 0;
  const attempts = new AttemptTracker();
  while (!o.signal?.aborted) {
    // Read the state first: a commit that settles the run, and output written before it, are then in the reads after it.
    const run = (await store.getRun(runId)) ?? first;
    const commits = await store.listCommitLog({ afterSeq: after, sessionId: first.sessionId, limit: PAGE });
    for (const c of commits) {
      after = c.seq;
      yield { type: 'commit', ...c, state: run.state };
    }
    const chunks = o.output ? await store.listOutput({ runId, afterSeq: afterOutput, limit: PAGE }) : [];
    for (const c of chunks) {
      afterOutput = c.seq;
      yield* attempts.see(c);
    }
    if (commits.length === PAGE || chunks.length === PAGE) continue;
    if (!o.forever && SETTLED.includes(run.state)) {
      yield* attempts.settle();
      return;
    }
    await pause(o.pollMs ?? 100, o.signal);
  }
}

const PAGE = 500;

/** Resolves with the run once it is in a settled state; rejects with the signal's reason when aborted. */
export async function waitForRun(store: Store, runId: string, o: { signal?: AbortSignal; pollMs?: number } = {}): Promise<Run> {
  for (;;) {
    o.signal?.throwIfAborted();
    const run = await store.getRun(runId);
    if (!run) throw new BerthError('run_not_found', `no run ${runId} in ${store.location}`, { ids: { runId } });
    if (SETTLED.includes(run.state)) return run;
    await pause(o.pollMs ?? 200, o.signal);
  }
}
