import { z } from 'zod';
import type { Json } from './json';

/**
 * What a judge (the plan's acceptance command or an operator) decided about a completed run.
 * Acceptance is a record apart from the run state: a rejected run stays `completed`.
 */
export interface AcceptanceDecision {
  id: string;
  runId: string;
  /** Idempotency key: a second decision with the same request id is the first one. */
  requestId: string;
  decision: 'accepted' | 'rejected';
  /** `acceptance-command` or `user:NAME`. */
  actor: string;
  reason: string | null;
  /** For a command: its text, exit code, timeout flag, output digest and the effect that ran it. */
  evidence: Json;
  at: number;
  commitSeq: number;
}

/** The evidence the acceptance command leaves (stored as {@link AcceptanceDecision.evidence}). */
export const CommandEvidenceSchema = z.object({
  command: z.string(),
  exitCode: z.number().int(),
  timedOut: z.boolean(),
  /** `sha256:` over the digests of stdout and stderr (see host/plan/step-exec.ts). */
  outputDigest: z.string(),
  effectId: z.string(),
});
export type CommandEvidence = z.infer<typeof CommandEvidenceSchema>;

/**
 * Resource use measured as it happens (model token counts, sandbox CPU and memory): an
 * observation written outside commits, like the egress audit, so work a crash wasted (a request
 * answered before the host died, a step re-run) is counted, because it was paid for.
 */
export interface CostSample {
  runId: string;
  at: number;
  /** The model for token meters, the lease for sandbox meters. */
  key: string;
  meters: Partial<Record<CostMeter, number>>;
}

export const COST_METERS = ['model.requests', 'tokens.prompt', 'tokens.completion', 'tokens.cached', 'cpu.usec', 'memory.byte_ms', 'exec.count', 'sandbox.restores'] as const;
export type CostMeter = (typeof COST_METERS)[number];

/** One summed meter of a run. */
export interface CostTotal {
  runId: string;
  meter: CostMeter;
  key: string;
  amount: number;
}
