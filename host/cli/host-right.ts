
/** Exit codes of `berth`, documented in the usage text and the README. */
export const EXIT = {
  ok: 0,
  /** The run failed, was cancelled or compensated, or the command hit an error. */
  failed: 1,
  usage: 2,
  needsReconciliation: 3,
  /** Another host took this run over (or this host's lease on it ran out); this one stopped all work on it. */
  rightLost: 4,
  /** Stopped by Ctrl-C or SIGTERM; `berth resume RUN` continues. */
  signal: 130,
} as const;

export { whileHoldingRight } from '../api/drive';
