import { isBerthError } from '../errors';
import type { Run, RunState } from '../model';
import { EXIT } from './host-right';
import { capLines } from './line-cap';

export { capLines, LINE_CAP, LineCap, LiveLineCap } from './line-cap';

/**
 * Prints `value` as JSON (with --json) or as the human text `human` renders. JSON is one line:
 * with --json every line a command writes is one JSON object (NDJSON), the events of a driven run
 * and its result alike, so a line reader and jq both read it (`jq .` pretty-prints).
 */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);
}

/**
 * `emit` with --json for a value holding one long list: the same bytes as `JSON.stringify(value)`
 * and a newline, written a batch of the list's elements at a time, so the text of a 3,000-step
 * run's summary (megabytes) is never one string beside the rows it came from (it was ~10 MB of that
 * run's peak RSS, at its very end; bench/RESULTS.md session 18). Without --json, `human()`.
 */
export function emitWithList<K extends string>(json: boolean, value: Record<string, unknown> & Record<K, unknown[]>, key: K, human: () => string, write: (s: string) => void = (s) => void process.stdout.write(s)): void {
  if (!json) return write(`${human()}\n`);
  const list = value[key];
  if (list.length === 0) return write(`${JSON.stringify(value)}\n`);
  // The list's place in the text of the value without it: `"key":0` can only be that member, as a
  // string holding it is written with its quotes escaped. A key of the value sits at depth one;
  // a nested object's member of the same name comes inside braces of its own, so the first match
  // at depth one is taken by counting them.
  const text = JSON.stringify({ ...value, [key]: 0 });
  const at = memberAt(text, `${JSON.stringify(key)}:0`);
  const name = `${JSON.stringify(key)}:`;
  const [head, tail] = [text.slice(0, at), text.slice(at + name.length + 1)];
  write(`${head}${name}[`);
  const BATCH = 100;
  for (let i = 0; i < list.length; i += BATCH) {
    const texts = list.slice(i, i + BATCH).map((v) => JSON.stringify(v) ?? 'null');
    write(`${texts.join(',')}${i + BATCH < list.length ? ',' : ''}`);
  }
  write(`]${tail}\n`);
}

/** Where `member` starts as a member of the outermost object of the compact JSON `text`. */
function memberAt(text: string, member: string): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (depth === 1 && c === '"' && (text[i - 1] === '{' || text[i - 1] === ',') && text.startsWith(member, i)) return i;
    if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return -1;
}

/** One error, to stderr: its JSON with --json (an untyped one as `internal_error`), else `berth: code: message`; stack traces only with --debug. */
export function reportError(json: boolean, err: unknown, debug = false): void {
  if (isBerthError(err)) {
    process.stderr.write(json ? `${JSON.stringify({ error: err.toJSON() })}\n` : `berth: ${err.code}: ${err.message}\n`);
    if (debug && err.stack) process.stderr.write(`${err.stack}\n`);
    return;
  }
  // A stack is for whoever debugs Berth, not for the operator: --debug shows it.
  const message = err instanceof Error ? (debug ? (err.stack ?? err.message) : err.message) : String(err);
  // A script that asked for JSON parses what it gets, a bug's report included.
  if (json) return void process.stderr.write(`${JSON.stringify({ error: { code: 'internal_error', message, retryable: false, ids: {} } })}\n`);
  process.stderr.write(`berth: internal error: ${message}${debug ? '' : ' (run again with --debug for the stack trace)'}\n`);
}

/** `12.3s`, `4m05s`, `1h02m`. */
export { duration } from '../api/duration';

/** Left-aligned columns. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

// C0 controls but newline and tab, DEL, C1 controls (U+009B is a one-character CSI on many
// terminals) and the bidi embeddings, overrides and isolates that reorder what a line shows.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with every terminal control character written out as an escape (`\x1b`, `\r`,
 * `\u009b`), so command output can neither move the cursor, rewrite a line, ring, retitle the
 * terminal nor reorder what it shows. Used on everything a command printed before it reaches
 * the operator's terminal; stored output stays as it was.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, (c) => {
    const code = c.charCodeAt(0);
    if (c === '\r') return '\\r';
    return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * The column that starts every line `berth logs` prints: `berth │` for Berth's own lines, `  out │`
 * or `  err │` for what a command printed. Output is split at newlines and escaped, so a command
 * can never start a line of its own: whatever it prints sits after an output column.
 */
export const LOG_COLUMN = { berth: 'berth │ ', stdout: '  out │ ', stderr: '  err │ ' } as const;

/** A command's output as `berth logs` lines: escaped, each line behind its stream's column. */
export function outputLines(stream: 'stdout' | 'stderr', text: string): string[] {
  // A kept tail is bounded when Berth wrote it, but an imported record's need not be: every line is capped.
  const lines = capLines(text);
  if (lines.length === 1 && lines[0] === '') return [];
  return lines.map((line) => LOG_COLUMN[stream] + escapeControl(line));
}

/**
 * The exit code of a command that drove `run` until it settled; every non-zero one says why on
 * stderr (stdout may be JSON, or a table the caller does not show). `endsWell`: the state that is
 * this command's success besides `completed` (`cancelled`, for berth cancel).
 */
export function runExit(run: Run, reason: string, endsWell?: RunState): number {
  if (run.state === 'completed' || run.state === endsWell) return EXIT.ok;
  process.stderr.write(`berth: run ${run.id} is ${run.state}${reason ? `: ${reason}` : ''}\n`);
  return run.state === 'needs_reconciliation' ? EXIT.needsReconciliation : EXIT.failed;
}
