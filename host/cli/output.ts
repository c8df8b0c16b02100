import { isBerthError } from '../errors';
import type { Run } from '../model';
import { EXIT } from './host-right';

/** Prints `value` as JSON (with --json) or as the human text `human` renders. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
}

/** One error, to stderr: the typed error's JSON with --json, else `berth: code: message`; stack traces only with --debug. */
export function reportError(json: boolean, err: unknown, debug = false): void {
  if (isBerthError(err)) {
    process.stderr.write(json ? `${JSON.stringify({ error: err.toJSON() }, null, 2)}\n` : `berth: ${err.code}: ${err.message}\n`);
    if (debug && err.stack) process.stderr.write(`${err.stack}\n`);
    return;
  }
  // A stack is for whoever debugs Berth, not for the operator: --debug shows it.
  const message = err instanceof Error ? (debug ? (err.stack ?? err.message) : err.message) : String(err);
  process.stderr.write(`berth: internal error: ${message}${debug ? '' : ' (run again with --debug for the stack trace)'}\n`);
}

/** `12.3s`, `4m05s`, `1h02m`. */
export function duration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Left-aligned columns. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

/**
 * The exit code of a command that drove `run` until it settled; every non-zero one says why on
 * stderr (stdout may be JSON, or a table the caller does not show).
 */
export function runExit(run: Run, reason: string): number {
  if (run.state === 'completed') return EXIT.ok;
  process.stderr.write(`berth: run ${run.id} is ${run.state}${reason ? `: ${reason}` : ''}\n`);
  return run.state === 'needs_reconciliation' ? EXIT.needsReconciliation : EXIT.failed;
}
