import { EXIT } from './host-right';

/** What quitting at once leaves of a run, and how to continue it. */
export function runLeft(runId: string): string {
  return `The run is as its last commit left it; its step's command may still be running in the sandbox. Continue with: berth resume ${runId} (it stops what this host left running)`;
}

/**
 * Ctrl-C and SIGTERM for a command that drives runs; `left` says what quitting at once leaves. The first calls `onStop`: the host stops as
 * it does (the step's command killed, nothing decided). A second one while it is still stopping
 * quits at once, as an impatient operator means it to, but says what that leaves: with Node's
 * default (the handler was `once`) the process vanished without a word, its run's command possibly
 * still running in the sandbox. The quit handler stays installed until the process ends, so the
 * clean-up after the drive (sandbox removal, store close) is covered too.
 */
export function stopSignals(left: string, onStop: (signal: NodeJS.Signals) => void): { dispose(): void } {
  let stopped = false;
  const quit = (signal: NodeJS.Signals) => {
    process.stderr.write(`\nberth: ${signal} again while stopping: quitting at once. ${left}\n`);
    process.exit(EXIT.signal);
  };
  const first = (signal: NodeJS.Signals) => {
    if (stopped) return;
    stopped = true;
    process.off('SIGINT', first);
    process.off('SIGTERM', first);
    process.on('SIGINT', quit);
    process.on('SIGTERM', quit);
    onStop(signal);
  };
  process.on('SIGINT', first);
  process.on('SIGTERM', first);
  return {
    dispose() {
      // Only the first stage: once a stop began, a second signal still quits (see above).
      process.off('SIGINT', first);
      process.off('SIGTERM', first);
    },
  };
}
