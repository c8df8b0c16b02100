/**
 * Berth as a library: the same host the `berth` CLI, `berth serve` and `berth worker` are built
 * on. Open a host over a store, submit plan, agent or application runs, drive them (or leave them
 * for a worker), follow their commits and decide what needs a person.
 *
 * ```ts
 * import { Berth } from 'berth';
 * await using berth = await Berth.open({ store: '.berth/berth.db' });
 * const { run } = await berth.submitPlan('examples/c-hello/plan.yaml');
 * const driving = berth.drive(run.id);
 * for await (const e of berth.events(run.id)) console.log(e.seq, e.label, e.state);
 * console.log((await driving).run.state);
 * ```
 *
 * Every name here is part of the package's public face; anything deeper is internal.
 * @packageDocumentation
 */

/** The host: {@link Berth.open} builds the store, Docker client, registry transport, artifact store, logger and clock once. */
export { Berth, type BerthOptions, type DriveOptions } from './api/berth';
export type { OpenOptions, HostParts } from './api/assemble';
/** How a drive ended: settled (with the run), or stopped by the caller's signal. */
export type { Driven } from './api/drive';
export type { RunEvent, FollowOptions, RunOrOutputEvent } from './api/events';
export type { OutputEvent, InterruptedEvent, FollowedOutput } from './output';
export type { ReconcileChoice, Reconciled } from './api/reconcile';
export type { GcOptions, GcReport } from './api/gc';
export type { OrphansReport } from './api/orphans';
export type { WorkerOptions, RunningWorker } from './api/worker';
export type { ForkOptions } from './api/forks';
export type { HostView } from './api/run-driver';
/** `Berth.connect({ url, token })`: the client of `berth serve`'s `/api/v1` on another machine. */
export { RemoteBerth, type ConnectOptions, type PageOptions, type RemoteRunFilter } from './api/remote';
export type { ListedRun, OutputChunk } from './store';

/** `berth mcp` as a library: a Berth session behind an MCP server (`startMcpHttp`: Streamable HTTP; `berth mcp` for stdio). */
// From the files, not the folder's index: the face's declarations stay free of the MCP SDK's (DOM-typed) ones.
export { McpSessions, type CallOutcome, type McpSessionOptions } from './mcp/mcp-session';
export { startMcpHttp, type McpHttpOptions } from './mcp/mcp-http';

/** Typed errors: a stable `code`, whether the same call may succeed later (`retryable`), and the ids concerned. */
export { BerthError, isBerthError, type ErrorIds } from './errors';

/** Application task kinds and documents: phases committed durably, effects recorded, resumed after a crash. */
export {
  defineTask,
  defineDocument,
  extension,
  spawnEach,
  childResults,
  notSent,
  rejected,
  httpAnswerError,
  classifyFetchError,
  ActionError,
  type Extension,
  type TaskKindDefinition,
  type TypedPhaseContext,
  type TypedDecision,
  type Decision,
  type DocumentType,
  type PhaseContext,
  type EffectVerifier,
  type Verdict,
} from './agent/custom-tasks';

/** The records a program reads: runs, their states and transitions, tasks, effects, snapshots. */
export type { Run, RunState, RunTransition, Task, Effect, Snapshot, Entry, Json } from './model';
export type { StartAgentRun, ContinueSession } from './agent';
export type { LoadedPlan } from './plan';
