import { canonicalJson, type Environment } from '../../environment';
import { CALLER_DRIVEN_URL, continueSession, dictatedMessage, ENTRY, parseDictated, submitAgentRun, type ToolResultEntry } from '../agent';
import type { Berth } from '../api/berth';
import { SETTLED, startHost, takeRun, whileHoldingRight } from '../api/drive';
import { stopRuntime } from '../api/run-end';
import type { Submitted } from '../kernel';
import type { HostRuntime } from '../runtime/host-runtime';
import { BerthError, isBerthError } from '../errors';
import { isFinalRunState, OPEN_RUN_STATES, type Run, type Submission } from '../model';
import { newId } from '../support';
import type { Store } from '../store';
import { KeyedLock } from '../agent/session-lock';
import { SANDBOX_TOOL_NAMES } from './mcp-tools';
import { servedElsewhere } from './served-elsewhere';
import { cutShort } from './cut-short';
import { cancelledBeforeSubmit, inTurn } from './queued-turn';
import type { CallOptions, CallOutcome } from './call-outcome';

export type { CallOptions, CallOutcome } from './call-outcome';

export interface McpSessionOptions {
  berth: Berth;
  /** The sandbox of a session this server creates; without it, every call must name an existing session. */
  environment?: Environment & { image: { digest: string } };
  workspaceDir?: string | null;
  /** The session calls without a `session` argument go to (created on the first such call when absent). */
  sessionId?: string;
  /** Tools whose every call in a session this server creates waits for an operator (`berth approve RUN CALL_ID`). */
  requireApproval?: string[];
}

/**
 * Every turn a caller-driven run takes is at most one dictated call and its result. The tools are
 * named so that `snapshot`, which a model is not offered by default, can be dictated.
 */
const SETTINGS = { model: { baseUrl: CALLER_DRIVEN_URL, model: 'caller', apiKeyEnv: 'BERTH_CALLER_NO_KEY', stream: false, maxAttempts: 1_000 }, maxTurns: 3, tools: [...SANDBOX_TOOL_NAMES] };

/**
 * Berth sessions driven by an MCP client. Each call is one run of the session (its request id is
 * `mcp:<call id>`), whose "model" dictates exactly that call: so it is a tool task of the built-in
 * agent, with its replay policy, approvals, egress, secret scrubbing and snapshots, and it is
 * settled from the store after a crash. A call repeated with the same `call_id` returns the
 * committed outcome of the first, never a second execution.
 */
export class McpSessions {
  private readonly lock = new KeyedLock();
  private current: string | undefined;
  private rt: Promise<HostRuntime> | undefined;
  /** Runs this server drives for a call, until they end (the session's next call waits for them), by session. */
  private readonly ending = new Map<string, Promise<unknown>>();
  /** Of those, the runs already answered at their call's result commit, still ending (the root's phase and end). */
  private readonly answeredEnding = new Map<string, Promise<unknown>>();
  /** The committed results those answers were made from, by run (taken once by `settle`). */
  private readonly early = new Map<string, ToolResultEntry>();

  constructor(private readonly o: McpSessionOptions) {
    this.current = o.sessionId;
  }

  get sessionId(): string | undefined {
    return this.current;
  }

  async call(tool: string, args: Record<string, unknown>, o: CallOptions = {}): Promise<CallOutcome> {
    const callId = o.callId ?? newId('call');
    const requestId = `mcp:${callId}`;
    const store = this.o.berth.store;
    const existing = await store.findSubmission(requestId);
    if (existing) {
      const run = (await store.getRun(existing.runId))!;
      sameCall(existing, run, { tool, args, sessionId: o.sessionId });
      return this.lock.run(run.sessionId, () => this.settle(run, callId, tool, o.signal));
    }
    const sessionId = o.sessionId ?? this.current;
    if (!sessionId) return inTurn(this.lock, 'new', o, () => this.start(tool, args, callId, requestId, o));
    await this.requireSession(sessionId);
    return inTurn(this.lock, sessionId, o, async () => {
      await this.ending.get(sessionId);
      await this.settleOpenRuns(sessionId, o.signal);
      const message = dictatedMessage({ id: callId, tool, arguments: args });
      const run = await this.submitAndDrive((rt) => continueSession({ ...rt, toolNames: [...rt.agent.tools.keys()], hostId: this.o.berth.hostId }, { sessionId, message, requestId, start: true }), o, undefined, callId);
      return this.settle(run, callId, tool, o.signal);
    });
  }

  /** The session's runs that a dead host left unfinished are driven to their end first; one parked for a decision stops the call. */
  private async settleOpenRuns(sessionId: string, signal?: AbortSignal): Promise<void> {
    // Only the open runs are read: every call is a run, so the session's whole list grows with each call.
    for (const run of await this.o.berth.list({ sessionId, states: OPEN_RUN_STATES })) {
      if (run.state === 'needs_reconciliation') {
        throw new BerthError('session_needs_reconciliation', `session ${sessionId}: run ${run.id} has a call whose effect is uncertain; decide it with the reconcile tool (accept: it took effect, or fail) before the next call`, {
          ids: { sessionId, runId: run.id },
        });
      }
      if (!isFinalRunState(run.state)) await this.drive(run, signal);
    }
  }

  private async start(tool: string, args: Record<string, unknown>, callId: string, requestId: string, o: CallOptions): Promise<CallOutcome> {
    if (this.current) return this.call(tool, args, { ...o, sessionId: this.current, callId });
    if (!this.o.environment) throw new BerthError('session_required', 'this server has no environment to create a session from (berth mcp --env FILE): pass the id of an existing session as `session`');
    const message = dictatedMessage({ id: callId, tool, arguments: args });
    const environment = this.o.environment;
    const run = await this.submitAndDrive(
      (rt) => submitAgentRun({ ...rt, toolNames: [...rt.agent.tools.keys()] }, { message, settings: { ...SETTINGS, requireApproval: this.o.requireApproval ?? [] }, environment, workspaceDir: this.o.workspaceDir ?? null, requestId, start: true }),
      o,
      (r) => (this.current = r.sessionId),
      callId,
    );
    return this.settle(run, callId, tool, o.signal);
  }

  /**
   * Resolves once the session's runs answered at their result's commit have ended (what a reader of
   * its runs' states must wait for: the answer said the call ended). A call still running is not
   * waited for: it is pending, and a reader asked while it runs (another client's `status`) must
   * not wait for as long as its command does.
   */
  async ended(sessionId: string): Promise<void> {
    await this.answeredEnding.get(sessionId);
  }

  async requireSession(sessionId: string): Promise<void> {
    const s = await this.o.berth.store.getSession(sessionId);
    if (!s) throw new BerthError('session_not_found', `no session ${sessionId} in this store`, { ids: { sessionId } });
  }

  /**
   * One host runtime for the server's life: it owns the sessions it submits to (from the submit
   * commit on, as `berth agent|chat` do), so the session's sandbox stays held between calls and is
   * not verified again for each. A refused claim stops a runtime: the next call starts another.
   */
  private runtime(): Promise<HostRuntime> {
    this.rt ??= startHost(this.o.berth).then((h) => h.rt);
    return this.rt;
  }

  private async owning<T>(f: (rt: HostRuntime) => Promise<T>): Promise<T> {
    const rt = await this.runtime();
    try {
      return await f(rt);
    } catch (err) {
      if (isBerthError(err, 'run_owned') || isBerthError(err, 'execution_right_lost')) {
        this.rt = undefined;
        await stopRuntime(this.o.berth, rt).catch(() => {});
      }
      throw isBerthError(err, 'run_owned') ? await servedElsewhere(this.o.berth.store, err) : err;
    }
  }

  /**
   * Submits with the server's runtime and waits for the run to settle, or (a new run) for the
   * call's result to commit; a repeated request id takes the run over from a dead owner.
   */
  private submitAndDrive(submit: (rt: HostRuntime) => Promise<Submitted>, o: CallOptions, onRun?: (run: Run) => void, callId?: string): Promise<Run> {
    const signal = o.signal;
    return this.owning(async (rt) => {
      if (o.cancel?.aborted) throw cancelledBeforeSubmit();
      const s = await submit(rt);
      onRun?.(s.run);
      if (s.created) this.cancelOnRequest(s.run, o.cancel);
      // The same call sent again before its first answer (a client retrying) finds the run this
      // runtime already drives: claiming it again was refused by our own live claim (run_owned),
      // and that refusal stopped the runtime under the first call.
      if (!s.created && rt.kernel.epochOf(s.run.sessionId) === undefined) await takeRun(this.o.berth, rt, s.run);
      return s.created && callId ? this.answered(rt, s.run, callId, signal) : this.settled(rt, s.run, signal);
    });
  }

  /**
   * Resolves once the call's result is committed, with the run as it is then: the result is
   * durable and is the answer, and what is left of the run (the root's last phase and its end
   * commit; the root woke in the result's commit)
   * needs nothing from the client, so it ends after the answer; the session's next call (and
   * `close`) waits for it first. A result that says the call was interrupted is not answered
   * early: that run ends in needs_reconciliation, which the answer must already show.
   */
  private answered(rt: HostRuntime, run: Run, callId: string, signal?: AbortSignal): Promise<Run> {
    // Not stopped by the request's signal: the run's end does not depend on this request.
    const settled = this.settled(rt, run);
    let off = () => {};
    const early = new Promise<Run>((resolve) => {
      off = rt.kernel.onCommit((e) => {
        if (e.sessionId !== run.sessionId || !e.label.startsWith('phase.complete:agent-tool')) return;
        void resultOf(this.o.berth.store, run, callId).then((r) => {
          if (!r || r.status === 'interrupted') return;
          this.early.set(run.id, r);
          this.answeredEnding.set(run.sessionId, ending);
          resolve(run);
        }, () => {});
      });
    });
    const ending = settled.catch(() => {});
    this.ending.set(run.sessionId, ending);
    void ending.finally(() => {
      off();
      if (this.ending.get(run.sessionId) === ending) this.ending.delete(run.sessionId);
      if (this.answeredEnding.get(run.sessionId) === ending) this.answeredEnding.delete(run.sessionId);
    });
    const stopped = new Promise<never>((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
    return Promise.race([settled, early, stopped]).finally(off);
  }

  /**
   * A client's cancel of the call it submitted cancels the call's run, as `berth cancel RUN` does:
   * the command is stopped, and a call stopped mid-way leaves its effect uncertain (the session then
   * awaits a reconcile decision), as any interrupted call does. Before, the call ran on to its end
   * and the client's next call waited for it without a word.
   */
  private cancelOnRequest(run: Run, cancel: AbortSignal | undefined): void {
    if (!cancel) return;
    const stop = () => void this.o.berth.cancel(run.id).catch(() => {});
    if (cancel.aborted) stop();
    else cancel.addEventListener('abort', stop, { once: true });
  }

  private drive(run: Run, signal?: AbortSignal): Promise<Run> {
    return this.owning(async (rt) => {
      // A call whose client went away keeps running on this server's runtime: its repeat waits for
      // it there. Claiming the session again would be refused by our own live claim, and a refused
      // claim stops the runtime, and with it every run it drives (the session then hung for good).
      if (rt.kernel.epochOf(run.sessionId) === undefined) await takeRun(this.o.berth, rt, run);
      return this.settled(rt, run, signal);
    });
  }

  private async settled(rt: HostRuntime, run: Run, signal?: AbortSignal): Promise<Run> {
    const waiting = rt.kernel.waitForRun(run.id, { signal, states: [...SETTLED] });
    return whileHoldingRight(rt.kernel, run.id, waiting, run.sessionId);
  }

  /**
   * Starts the host runtime (this host's sweep, the kernel) while the client's handshake and first
   * request are on their way, not at the first call, which waited for it (issue 30's reconnect).
   * A start that fails is left to the first call, which starts it again and meets the error itself.
   */
  startEarly(): void {
    const rt = this.runtime();
    rt.catch(() => {
      if (this.rt === rt) this.rt = undefined;
    });
  }

  /** Stops the server's runtime, if its start succeeded (the sessions' sandboxes stay leased for the next server). */
  async close(): Promise<void> {
    // Runs answered early end first (a stop now would leave them to the next server's first call).
    await Promise.race([Promise.all(this.ending.values()), new Promise((r) => setTimeout(r, 10_000).unref())]);
    const rt = this.rt;
    this.rt = undefined;
    const started = await rt?.catch(() => undefined);
    if (started) await stopRuntime(this.o.berth, started);
  }

  /** Drives the call's run to its end (here or, after a crash, from where the dead host left it) and reads the result it committed. */
  private async settle(run: Run, callId: string, tool: string, signal?: AbortSignal): Promise<CallOutcome> {
    // A run answered at its result commit (see answered) may still be ending: its result is what counts.
    const early = this.early.get(run.id);
    this.early.delete(run.id);
    const settled = early || isFinalRunState(run.state) || run.state === 'needs_reconciliation' ? run : await this.drive(run, signal);
    const result = early ? { body: early } : await resultEntryOf(this.o.berth.store, settled, callId);
    const base = { sessionId: settled.sessionId, runId: settled.id, callId, tool };
    if (!result) {
      const short = await cutShort(this.o.berth.store, settled);
      if (short) return { ...base, ...short };
      const why = `${settled.state}: ${(await this.o.berth.store.listRunTransitions(settled.id)).at(-1)?.reason ?? ''}`;
      throw new BerthError('call_failed', `call ${callId} ended without a result (run ${settled.id} ${why})`, { ids: { sessionId: settled.sessionId, runId: settled.id } });
    }
    const body = result.body as ToolResultEntry;
    return { ...base, status: body.status === 'interrupted' ? 'uncertain' : body.status, isError: body.isError, content: body.content, ...(body.detail === undefined ? {} : { detail: body.detail }) };
  }
}

/** The call's committed result entry in its run, if there is one yet. */
async function resultEntryOf(store: Store, run: Run, callId: string): Promise<{ body: ToolResultEntry } | undefined> {
  // The run's entries only: a whole-session read grows with every call the session made.
  const entries = await store.listEntries(run.sessionId, { runId: run.id });
  const e = entries.find((x) => x.kind === ENTRY.toolResult && (x.body as unknown as ToolResultEntry).toolCallId === callId);
  return e ? { body: e.body as unknown as ToolResultEntry } : undefined;
}

const resultOf = async (store: Store, run: Run, callId: string) => (await resultEntryOf(store, run, callId))?.body;

/**
 * A call_id names one call: asked again for another tool, other arguments or another session, the
 * answer would be the first call's outcome under the new call's name (the client would take an
 * `exec`'s output for the file it asked to read), so it is refused, naming the first call.
 */
function sameCall(first: Submission, run: Run, asked: { tool: string; args: Record<string, unknown>; sessionId?: string }): void {
  const message = (first.input as { message?: unknown } | null)?.message;
  const was = typeof message === 'string' ? parseDictated(message) : null;
  if (!was) return;
  const differs = was.tool !== asked.tool || canonicalJson(was.arguments) !== canonicalJson(asked.args) || (asked.sessionId !== undefined && asked.sessionId !== run.sessionId);
  if (!differs) return;
  const shown = (tool: string, args: unknown, sessionId: string) => `${tool} ${JSON.stringify(args).slice(0, 200)} in session ${sessionId}`;
  throw new BerthError(
    'call_id_reused',
    `call_id ${was.id} was first used for ${shown(was.tool, was.arguments, run.sessionId)} (run ${run.id}); this call asks for ${shown(asked.tool, asked.args, asked.sessionId ?? run.sessionId)}: repeat the first call exactly, or use a new call_id for a new call`,
    { ids: { sessionId: run.sessionId, runId: run.id } },
  );
}
