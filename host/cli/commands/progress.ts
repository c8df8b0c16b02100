import type { PlanProgress } from '../../plan';
import { duration, escapeControl } from '../output';

/**
 * Live progress of plan runs: human lines on stderr (step, elapsed time, output tail), or one JSON
 * object per event on stdout with --json. Output lines are prefixed with their step.
 */
export function progressPrinter(json: boolean, total: () => number) {
  const started = new Map<string, number>();
  const partial = new Map<string, string>();
  return (p: PlanProgress) => {
    if (json) {
      process.stdout.write(`${JSON.stringify({ event: p })}\n`);
      return;
    }
    const w = (s: string) => process.stderr.write(`${s}\n`);
    switch (p.type) {
      case 'sandbox':
        w(`  sandbox: ${escapeControl(p.message)}`);
        break;
      case 'step-start':
        started.set(`${p.runId}:${p.index}`, Date.now());
        w(`▶ [${p.index + 1}/${total()}] ${p.step}: ${escapeControl(p.command)}`);
        break;
      case 'step-output': {
        const key = `${p.runId}:${p.index}:${p.stream}`;
        const lines = ((partial.get(key) ?? '') + p.text).split('\n');
        partial.set(key, lines.pop() ?? '');
        const since = Date.now() - (started.get(`${p.runId}:${p.index}`) ?? Date.now());
        for (const line of lines) w(`  ${p.step} ${duration(since).padStart(6)} │ ${escapeControl(line)}`);
        break;
      }
      case 'step-end': {
        for (const stream of ['stdout', 'stderr']) {
          const rest = partial.get(`${p.runId}:${p.index}:${stream}`);
          if (rest) w(`  ${p.step}        │ ${escapeControl(rest)}`);
          partial.delete(`${p.runId}:${p.index}:${stream}`);
        }
        w(`${p.exitCode === 0 ? '✔' : '✘'} ${p.step} exit ${p.exitCode} in ${duration(p.durationMs)}${p.snapshotId ? ` snapshot ${p.snapshotId}` : ''}`);
        break;
      }
    }
  };
}
