import type { Environment } from '../../environment';
import type { Lease } from '../sandbox';
import { scrub, StreamScrubber, withSecrets, type ResolvedSecret } from '../secrets';
import type { PlanStep } from './plan-schema';
import type { PlanProgress } from './plan-input';

const TAIL = 4000;
const tail = (s: string) => (s.length > TAIL ? s.slice(-TAIL) : s);

/** What a step's command left behind, as committed in its effect receipt. */
export type StepReceipt = {
  exitCode: number;
  timedOut: boolean;
  oomKilled: boolean;
  durationMs: number;
  stdoutTail: string;
  stderrTail: string;
  truncated: boolean;
};

/**
 * Runs a plan step's command with its secrets exposed for this exec only. Everything that leaves
 * here (live progress and the receipt) is scrubbed of the secrets' values first: the receipt is
 * committed to the store and the progress is printed, and neither may hold a secret.
 */
export async function execStep(
  lease: Lease,
  step: PlanStep,
  env: Environment,
  secrets: readonly ResolvedSecret[],
  o: { runId: string; index: number; signal: AbortSignal; progress: (p: PlanProgress) => void },
): Promise<StepReceipt> {
  const scrubbers = { stdout: new StreamScrubber(secrets), stderr: new StreamScrubber(secrets) };
  const emit = (stream: 'stdout' | 'stderr', text: string) => {
    if (text) o.progress({ type: 'step-output', runId: o.runId, index: o.index, step: step.name, stream, text });
  };
  const r = await withSecrets(lease, secrets, (secretEnv) =>
    lease.exec(['sh', '-c', step.run], {
      // Secrets last: a step's plain `env` must not shadow what the manifest grants.
      env: { ...step.env, ...secretEnv },
      timeoutMs: (step.timeoutS ?? env.resources.commandTimeoutS) * 1000,
      signal: o.signal,
      onOutput: (stream, chunk) => emit(stream, scrubbers[stream].push(chunk.toString('utf8'))),
    }),
  );
  emit('stdout', scrubbers.stdout.end());
  emit('stderr', scrubbers.stderr.end());
  // Scrub the whole output before taking the tail, so the cut cannot split a value in two.
  return {
    exitCode: r.exitCode,
    timedOut: r.timedOut,
    oomKilled: r.oomKilled,
    durationMs: r.durationMs,
    stdoutTail: tail(scrub(r.stdout, secrets)),
    stderrTail: tail(scrub(r.stderr, secrets)),
    truncated: r.truncated,
  };
}
