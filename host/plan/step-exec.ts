import { createHash } from 'node:crypto';
import type { Environment } from '../../environment';
import type { Lease } from '../sandbox';
import { ScrubbedStream, withSecrets, type ResolvedSecret } from '../secrets';
import type { PlanStep } from './plan-schema';
import type { PlanProgress } from './plan-input';
import type { OutputWriter } from '../output';
import { notSent } from '../kernel';

const TAIL = 4000;
const tail = (s: string) => (s.length > TAIL ? s.slice(-TAIL) : s);

/** What a step's command left behind, as committed in its effect receipt. */
export type StepReceipt = {
  exitCode: number;
  timedOut: boolean;
  oomKilled: boolean;
  diskExceeded: boolean;
  pidsLimited: boolean;
  durationMs: number;
  stdoutTail: string;
  stderrTail: string;
  truncated: boolean;
  /**
   * `sha256:` of `stdout:<sha256 of stdout>\nstderr:<sha256 of stderr>`, over the whole scrubbed
   * output (not only the tails kept): the acceptance command's evidence. Absent in older receipts.
   */
  outputDigest?: string;
  /** The sandbox's CPU and memory use over the command (host/sandbox exec-usage.ts), when readable. */
  usage?: { cpuUsec: number; memoryByteMs: number };
};

/**
 * Runs a plan step's command with its own secrets exposed for this exec only. `secrets` are all
 * the run's secrets: everything that leaves here (live progress and the receipt) is scrubbed of
 * every one of them, granted to this step or not, since the receipt is committed to the store and
 * the progress is printed, and neither may hold a secret.
 */
export async function execStep(
  lease: Lease,
  step: PlanStep,
  env: Environment,
  secrets: readonly ResolvedSecret[],
  o: {
    runId: string;
    index: number;
    signal: AbortSignal;
    progress: (p: PlanProgress) => void;
    /** Read back by a later owner after a crash (`Lease.stopEarlierCommands`); default `<run>:step:<index>`. */
    tag?: string;
    /** Where the scrubbed output is written while the command runs (host/output); ended here with how the command ended. */
    output?: OutputWriter;
    /** The command's longest run; default the step's `timeoutS`, else the environment's `commandTimeoutS`. */
    timeoutMs?: number;
  },
): Promise<StepReceipt> {
  // Output is scrubbed as it streams and only then cut to the tail the receipt keeps: scrubbing the
  // sandbox's already capped text could leave part of a value where its cut fell.
  const streams = { stdout: new ScrubbedStream(secrets, TAIL * 2), stderr: new ScrubbedStream(secrets, TAIL * 2) };
  const hashes = { stdout: createHash('sha256'), stderr: createHash('sha256') };
  const emit = (stream: 'stdout' | 'stderr', text: string) => {
    hashes[stream].update(text);
    o.output?.push(stream, text);
    if (text) o.progress({ type: 'step-output', runId: o.runId, index: o.index, step: step.name, stream, text });
  };
  const granted = secrets.filter((s) => step.secrets.includes(s.name));
  const r = await withSecrets(lease, granted, (secretEnv) =>
    lease.exec(['sh', '-c', step.run], {
      // Secrets last: a step's plain `env` must not shadow what the manifest grants.
      env: { ...step.env, ...secretEnv },
      timeoutMs: o.timeoutMs ?? (step.timeoutS ?? env.resources.commandTimeoutS) * 1000,
      signal: o.signal,
      keepProcesses: step.keepProcesses,
      tag: o.tag ?? stepExecTag(o.runId, o.index),
      measure: true,
      onOutput: (stream, chunk) => emit(stream, streams[stream].push(chunk)),
    }),
  ).catch(async (err: unknown) => {
    emit('stdout', streams.stdout.end());
    emit('stderr', streams.stderr.end());
    await o.output?.end(`stopped: ${err instanceof Error ? err.message : String(err)}`);
    throw err;
  });
  emit('stdout', streams.stdout.end());
  emit('stderr', streams.stderr.end());
  await o.output?.end(endLine(r));
  // Proof, not a guess: the command was never handed to the sandbox (see exec-run.ts), so even a
  // `never` step cancelled here is settled as not sent instead of waiting for an operator.
  if (r.notStarted) throw notSent(`step ${step.name} was cancelled before its command started; nothing ran`, { code: 'step_not_started', retryable: false });
  return {
    exitCode: r.exitCode,
    timedOut: r.timedOut,
    oomKilled: r.oomKilled,
    diskExceeded: r.diskExceeded,
    pidsLimited: r.pidsLimited,
    durationMs: r.durationMs,
    stdoutTail: tail(streams.stdout.text()),
    stderrTail: tail(streams.stderr.text()),
    truncated: r.truncated,
    outputDigest: `sha256:${createHash('sha256').update(`stdout:${hashes.stdout.digest('hex')}\nstderr:${hashes.stderr.digest('hex')}`).digest('hex')}`,
    ...(r.usage ? { usage: r.usage } : {}),
  };
}

/** How a command ended, as its output's `end` chunk says it. */
function endLine(r: { exitCode: number; timedOut: boolean; cancelled: boolean; notStarted?: boolean; oomKilled: boolean; sandboxLost: boolean; durationMs: number }): string {
  if (r.notStarted) return 'cancelled before it started';
  const how = r.timedOut ? 'timed out' : r.cancelled ? 'cancelled' : r.sandboxLost ? 'sandbox lost' : r.oomKilled ? `killed for memory (exit ${r.exitCode})` : `exit ${r.exitCode}`;
  return `${how} after ${r.durationMs.toFixed(0)} ms`;
}

/** The tag a step's command carries in its sandbox, by which a later owner finds what became of it after a crash. */
export function stepExecTag(runId: string, index: number): string {
  return `${runId}:step:${index}`;
}
