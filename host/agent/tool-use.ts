import type { ToolRunContext } from '../../tools';
import type { PhaseContext } from '../kernel';
import type { Lease, OutputStream } from '../sandbox';
import { scrubDeep, scrubError, StreamScrubber } from '../secrets';
import type { AgentDeps } from './agent-deps';
import type { AgentRunInput, ToolCallInput } from './agent-input';
import { resolveToolSecrets } from './run-secrets';
import { secretSandbox, sweepSecretFiles } from './secret-sandbox';
import { meteredSandbox } from './metered-sandbox';
import type { CommandBudget } from './run-budget';
import { OutputWriter } from '../output';

/**
 * Runs one use of a tool (its `plan`, `run` or `verify`) against the session's sandbox. The run's
 * secrets are read for this use only: the tool's commands get the ones granted to it, and what
 * the use returns or throws, and its live output, is scrubbed of all of them before anything
 * commits, logs or shows it. Throws `secret_unavailable` (naming the secret and its source, and
 * before anything runs) when a secret cannot be read. With a `budget` its commands are held to the
 * run's `resources.runBudgetS` and counted (run-budget.ts).
 */
export async function useTool<T>(deps: AgentDeps, ctx: PhaseContext, input: AgentRunInput, call: ToolCallInput, lease: Lease, fn: (tctx: ToolRunContext) => Promise<T>, budget?: CommandBudget): Promise<T> {
  const runId = ctx.task.runId!;
  const secrets = await resolveToolSecrets(input.environment, call.name, { runId, taskId: ctx.task.id, sessionId: ctx.task.sessionId });
  const live = deps.onLive;
  // Written to the store while the call runs (host/output), so `berth logs -f`, the page and a
  // reader after a crash see it; every use (plan, run, verify) of the call is an attempt of its own.
  const output = new OutputWriter(ctx.store, { runId, source: `tool:${call.toolCallId}`, label: call.name, endSilent: false, now: () => ctx.now(), onError: (err) => ctx.log.warn({ runId, err }, 'live output of a tool call could not be written') });
  const emit = (stream: OutputStream, text: string) => {
    if (!text) return;
    output.push(stream, text);
    if (live) live({ type: 'tool-output', runId, toolCallId: call.toolCallId, stream, text });
  };
  const ended = async (how: string) => output.end(how);
  const base = { signal: ctx.signal, commandTimeoutMs: input.environment.resources.commandTimeoutS * 1000 };
  const metered = (sandbox: ToolRunContext['sandbox']) => meteredSandbox(sandbox, { store: ctx.store, runId, lease, now: () => ctx.now(), budget });
  if (secrets.all.length === 0) {
    try {
      const r = await fn({ ...base, sandbox: metered(lease), onOutput: emit });
      await ended(ctx.signal.aborted ? 'cancelled' : 'returned');
      return r;
    } catch (err) {
      await ended(`failed: ${err instanceof Error ? err.message : String(err)}`);
      throw err;
    }
  }

  if (secrets.all.some((s) => s.expose === 'file')) {
    // Commands in the sandbox on the call's behalf: counted (once per lease and process).
    const at = performance.now();
    await sweepSecretFiles(lease);
    budget?.spent(performance.now() - at);
  }
  // Execs through the sandbox are scrubbed already; these catch what a tool reports by itself.
  const scrubbers = { stdout: new StreamScrubber(secrets.all), stderr: new StreamScrubber(secrets.all) };
  const tctx: ToolRunContext = {
    ...base,
    sandbox: metered(secretSandbox(lease, secrets)),
    onOutput: (stream, text) => emit(stream, scrubbers[stream].push(text)),
  };
  let how = 'returned';
  try {
    return scrubDeep(await fn(tctx), secrets.all);
  } catch (err) {
    const scrubbed = scrubError(err, secrets.all);
    how = `failed: ${scrubbed instanceof Error ? scrubbed.message : String(scrubbed)}`;
    throw scrubbed;
  } finally {
    emit('stdout', scrubbers.stdout.end());
    emit('stderr', scrubbers.stderr.end());
    await ended(ctx.signal.aborted ? 'cancelled' : how);
  }
}
