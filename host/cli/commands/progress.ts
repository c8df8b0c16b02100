import type { PlanProgress } from '../../plan';
import { duration, escapeControl, LineCap } from '../output';
import { TerminalOutput } from '../terminal-backlog';

/**
 * Live progress of plan runs: human lines on stderr (step, elapsed time, output tail), or one JSON
 * object per event on stdout with --json. Output lines are prefixed with their step, each cut to
 * {@link LineCap}'s bound, and a terminal that falls behind skips lines ({@link TerminalOutput}), so
 * the view costs bounded memory whatever shape a command's output has and however slowly it is read.
 */
export function progressPrinter(json: boolean, total: () => number) {
  const started = new Map<string, number>();
  const partial = new Map<string, LineCap>();
  const term = new TerminalOutput(process.stderr);
  return (p: PlanProgress) => {
    if (json) {
      process.stdout.write(`${JSON.stringify({ event: p })}\n`);
      return;
    }
    switch (p.type) {
      case 'sandbox':
        term.own(`  sandbox: ${escapeControl(p.message)}`);
        break;
      case 'step-start':
        started.set(`${p.runId}:${p.index}`, Date.now());
        term.own(`▶ [${p.index + 1}/${total()}] ${p.step}: ${escapeControl(p.command)}`);
        break;
      case 'step-output': {
        const key = `${p.runId}:${p.index}:${p.stream}`;
        let lines = partial.get(key);
        if (!lines) partial.set(key, (lines = new LineCap()));
        const since = duration(Date.now() - (started.get(`${p.runId}:${p.index}`) ?? Date.now())).padStart(6);
        term.output(lines.push(p.text).map((line) => `  ${p.step} ${since} │ ${escapeControl(line)}`));
        break;
      }
      case 'step-end': {
        for (const stream of ['stdout', 'stderr']) {
          const rest = partial.get(`${p.runId}:${p.index}:${stream}`)?.end();
          if (rest) term.output([`  ${p.step}        │ ${escapeControl(rest)}`]);
          partial.delete(`${p.runId}:${p.index}:${stream}`);
        }
        term.own(`${p.exitCode === 0 ? '✔' : '✘'} ${p.step} exit ${p.exitCode} in ${duration(p.durationMs)}${p.snapshotId ? ` snapshot ${p.snapshotId}` : ''}`);
        break;
      }
    }
  };
}
