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
