import { z } from 'zod';
import { JsonSchema } from './json';

/** DESIGN.md effect statuses. `executing` is written before the action starts, so recovery can tell "never started" from "may have happened". */
export const EFFECT_STATUSES = ['intended', 'executing', 'confirmed', 'failed', 'unknown', 'compensated'] as const;
export type EffectStatus = (typeof EFFECT_STATUSES)[number];

/** How an action may be repeated after a crash: re-run freely, ask the target first, or never. */
export const REPLAY_POLICIES = ['safe', 'verify', 'never'] as const;
export type ReplayPolicy = (typeof REPLAY_POLICIES)[number];

/** Statuses under which a run may not complete. */
export function isUnresolvedEffect(status: EffectStatus): boolean {
  return status === 'intended' || status === 'executing' || status === 'unknown';
}

/**
 * How an attempt's outcome became known: `reply` (the action's own answer, or its own refusal),
 * `status_query` (a verifier asked the service afterwards: a lookup after a crash, `--verify`),
 * `operator` (a person's word, `actor` says who), `restore` (the operator continued from a
 * snapshot taken before the action), `cancel` (a cancel proved it could not have reached anyone).
 */
export const SETTLED_BY = ['reply', 'status_query', 'operator', 'restore', 'cancel'] as const;
export type SettledBy = (typeof SETTLED_BY)[number];

/** What one attempt did: still in flight, applied, proven not applied, or left uncertain. */
export const ATTEMPT_OUTCOMES = ['in_flight', 'applied', 'not_applied', 'unknown'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/**
 * One attempt of one effect, as committed: who made it (run, task, owner epoch), when it began and
 * ended, what came of it and how that was learnt. History: an attempt's error is never cleared by
 * a later attempt. `startedAt` is null for an attempt the record learnt of only when it was settled
 * (an effect written before attempts were kept, or carried uncertain into a fork).
 */
export const EffectAttemptSchema = z.strictObject({
  id: z.string(),
  n: z.number().int(),
  runId: z.string().nullable(),
  taskId: z.string().nullable(),
  epoch: z.number().int().nullable(),
  startedAt: z.number().nullable(),
  endedAt: z.number().nullable(),
  outcome: z.enum(ATTEMPT_OUTCOMES),
  settledBy: z.enum(SETTLED_BY).nullable(),
  settledAt: z.number().nullable(),
  actor: z.string().nullable(),
  error: JsonSchema,
});
export type EffectAttempt = z.infer<typeof EffectAttemptSchema>;
export const EffectAttemptLogSchema = z.array(EffectAttemptSchema);
