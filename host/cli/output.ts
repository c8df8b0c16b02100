import { isBerthError } from '../errors';

/** Prints `value` as JSON (with --json) or as the human text `human` renders. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
}

/** One error, to stderr: the typed error's JSON with --json, else `berth: code: message`. */
export function reportError(json: boolean, err: unknown): void {
  if (isBerthError(err)) {
    process.stderr.write(json ? `${JSON.stringify({ error: err.toJSON() }, null, 2)}\n` : `berth: ${err.code}: ${err.message}\n`);
    return;
  }
  process.stderr.write(`berth: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
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
