import type { z } from 'zod';
import type { Json, ReplayPolicy } from '../host/model';
import type { ExecOptions, ExecResult, DirEntry } from '../host/sandbox';

/** The part of a sandbox lease a tool may use: commands and workspace files, nothing else. */
export interface ToolSandbox {
  exec(cmd: string | string[], opts?: ExecOptions): Promise<ExecResult>;
  readFile(path: string, opts?: { maxBytes?: number }): Promise<Buffer>;
  writeFile(path: string, data: Buffer | string, opts?: { mode?: number }): Promise<void>;
  list(path: string): Promise<DirEntry[]>;
}

/** What a tool gets when it runs: the sandbox, the caller's signal and the command time limit. */
export interface ToolRunContext {
  sandbox: ToolSandbox;
  signal: AbortSignal;
  /** The environment's per-command limit; a tool never asks for more. */
  commandTimeoutMs: number;
  /** Live output of a running command, for progress displays (never stored from here). */
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
}

/**
 * What a tool produced. `content` is what the model reads (the context caps it again);
 * `isError` tells the model the call did not do what it asked. Stored as the effect's receipt.
 */
export interface ToolOutput {
  content: string;
  isError: boolean;
  detail?: Json;
  /**
   * The call was refused and did nothing (a path leaving the workspace, a missing file, a binary
   * file to read): its result's status is `error`, not `ok`. Without it an `isError` answer is a
   * call that ran and failed (a command exiting non-zero): status `ok`.
   */
  refused?: true;
}

/** A plan is the fixed expectation of a call, or the reason the call cannot be made at all. */
export type ToolPlan = { ok: true; plan: Json } | { ok: false; output: ToolOutput };

/** Answer of a `verify` tool about an action that may already have happened. */
export type ToolVerdict = { done: true; output: ToolOutput } | { done: false };

/**
 * One tool the model may call. The JSON schema the model sees is derived from `input`
 * (`z.toJSONSchema`), so the validator and the advertised shape cannot drift apart.
 */
export interface ToolDefinition<I = unknown> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  /** How a call may be repeated after a crash; may depend on the arguments (e.g. `exec` with `safe`). */
  replay: ReplayPolicy | ((args: I) => ReplayPolicy);
  /** Whether an operator must approve a call before it runs. */
  requiresApproval?: boolean | ((args: I) => boolean);
  /** Whether a call may change the sandbox, so a workspace digest (or snapshot) follows it. */
  mutates: boolean | ((args: I) => boolean);
  /**
   * A call always leaves a snapshot of the sandbox, whatever `snapshot.policy` says (the demand of
   * `on-demand`); its id is in the result's detail. Implies `mutates`.
   */
  snapshots?: boolean;
  /**
   * Offered to a model only when the run's settings name it (`tools`); a run without a list gets
   * the others. For tools that callers other than a model use (MCP's `snapshot`).
   */
  offeredByDefault?: boolean;
  /** Characters of output kept in the model context for a recent call. */
  contextCap: number;
  /**
   * Fixes, before anything runs, what the call is meant to produce (e.g. the digest a file must
   * have afterwards). Reads only; the result becomes part of the committed intent.
   */
  plan?(ctx: ToolRunContext, args: I): Promise<ToolPlan>;
  /**
   * Runs the call. An answer (even `isError`) means the call ran: its effect is confirmed with the
   * output as receipt. A throw says the call ended without one, and what the error proves decides
   * the record: throw `notSent`/`rejected` (from `host/kernel`, or an error they re-type) only when
   * nothing took effect (the result then says so and the effect is `failed`). Anything else (a
   * bare error, a lost connection, an engine that went away) may have taken effect: a `safe` call
   * is repeated, a `verify` call is verified, and any other is reported as uncertain (`unknown`,
   * the run needs reconciliation), never as `failed`.
   */
  run(ctx: ToolRunContext, args: I, plan: Json): Promise<ToolOutput>;
  /** For `verify` tools: has the call with this intent already taken effect? */
  verify?(ctx: ToolRunContext, args: I, plan: Json): Promise<ToolVerdict>;
}

/** Evaluates a per-call policy field. */
export function resolveFlag<I, T>(v: T | ((args: I) => T), args: I): T {
  return typeof v === 'function' ? (v as (a: I) => T)(args) : v;
}

/** A tool with its argument type erased, as registries hold them. */
export type AnyTool = ToolDefinition<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
