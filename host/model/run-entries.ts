/**
 * Entry kinds the host writes about a run's own life (not its conversation): what restarts,
 * verifications and losses happened, so the record accounts for every kill and every sandbox it
 * found or lost. Readers that rebuild a model context or a step's output skip them by kind.
 */
/** A task a dead host left running was taken up again (the kernel's restart commit). */
export const TASK_RESTARTED = 'task.restarted';
/** What a process verified of the run's sandbox before its first use after a restart (kernel, fingerprint, image, workspace, or the snapshot it restored). */
export const SANDBOX_VERIFIED = 'sandbox.verified';
/** A new owner claimed the run's session from one that never released it (killed, or lease ran out), naming it and its epoch. */
export const OWNER_LOST = 'owner.lost';
/**
 * What a process swept of the run's sandboxes before using them after a restart: the commands an
 * earlier owner left running in the sandbox it adopted (stopped), a sandbox of an earlier owner it
 * removed, or the run's sandbox it found lost at verification.
 */
export const SANDBOX_SWEPT = 'sandbox.swept';
