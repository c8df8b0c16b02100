import { ENTRY, type InterruptionEntry, type ModelEntry, type ToolResultEntry, type UserEntry } from '../../agent';
import type { Entry, Run, RunTransition } from '../../model';
import { attemptsOf, attemptState, type AttemptState, type OutputAttempt } from '../../output';
import type { StepResult } from '../../plan';
import type { OutputChunk } from '../../store';
import { duration, escapeControl, LOG_COLUMN, outputLines } from '../output';

/** Characters of an unfinished attempt's output `berth logs` shows (the end of it; `-f` shows everything). */
export const ATTEMPT_TAIL = 8000;
const LIVE: ReadonlySet<string> = new Set(['admitted', 'running', 'retry_wait', 'waiting_for_input', 'awaiting_approval', 'cancelling', 'reconciling', 'compensating']);
/** States a run is parked or decided in: a transition into or out of them is an operator's business. */
const DECIDED: ReadonlySet<string> = new Set(['needs_reconciliation', 'reconciling', 'cancelling', 'awaiting_approval', 'waiting_for_input']);

export const own = (text: string) => LOG_COLUMN.berth + escapeControl(text);
const at = (ms: number) => new Date(ms).toISOString();

/** An attempt as `--json` gives it: its state and output (the end of it when it did not finish). */
export interface AttemptView {
  source: string;
  label: string;
  attempt: string;
  state: AttemptState;
  end: string | null;
  startedAt: number;
  cutBytes: number;
  stdout: string;
  stderr: string;
}

export const isLive = (run: Run) => LIVE.has(run.state);

const tailOf = (s: string) => (s.length > ATTEMPT_TAIL ? s.slice(-ATTEMPT_TAIL) : s);

export function attemptViews(chunks: readonly OutputChunk[], run: Run): AttemptView[] {
  const all = attemptsOf(chunks);
  return all.map((a) => {
    const state = attemptState(a, all, isLive(run));
    const text = (ch: 'stdout' | 'stderr') => a.parts.filter((p) => p.channel === ch).map((p) => p.text).join('');
    return { source: a.source, label: a.label, attempt: a.attempt, state, end: a.end, startedAt: a.startedAt, cutBytes: a.cutBytes, stdout: tailOf(text('stdout')), stderr: tailOf(text('stderr')) };
  });
}

/** The operator's decisions, parks and changes of owner, in order (a plain run's start and end are not). */
export function decisionsOf(transitions: readonly RunTransition[]): RunTransition[] {
  return transitions.filter((t) => t.from === t.to || DECIDED.has(t.to) || (t.from !== null && DECIDED.has(t.from)));
}

export function decisionLine(t: RunTransition): string {
  if (t.from === t.to) return `${at(t.at)} ${t.actor} took the run over (${t.to}): ${t.reason}`;
  return `${at(t.at)} ${t.from ?? '-'} -> ${t.to} by ${t.actor}: ${t.reason}`;
}

/** An attempt's heading and output lines; a finished attempt is summed up by its step's result instead. */
export function attemptLines(kind: 'step' | 'tool', a: AttemptView | OutputAttempt & { state: AttemptState }): string[] {
  const what = `${kind} ${a.label}`;
  const head =
    a.state === 'interrupted'
      ? `${what}: attempt started ${at(a.startedAt)} was interrupted (no end recorded: its host stopped); the output it printed until then:`
      : a.state === 'running'
        ? `${what}: running since ${at(a.startedAt)}; its output so far:`
        : `${what}: ${a.end}`;
  const v = a as AttemptView;
  return [own(head), ...(a.cutBytes ? [own(`(${a.cutBytes} bytes of this attempt's output were cut by the cap)`)] : []), ...outputLines('stdout', v.stdout ?? ''), ...outputLines('stderr', v.stderr ?? '')];
}

type Timed = { at: number; lines: string[] };

/** A plan run's history: finished steps (their kept tails), attempts that did not finish, and decisions, by time. */
export function planHistory(entries: readonly Entry[], attempts: readonly AttemptView[], transitions: readonly RunTransition[]): string[] {
  const items: Timed[] = [];
  for (const e of entries) {
    if (e.kind !== 'plan.step.output') continue;
    const s = e.body as unknown as StepResult;
    items.push({ at: e.at, lines: [own(`step ${s.step}: exit ${s.exitCode}, ${duration(s.durationMs)}${s.diskExceeded ? ', disk_exceeded' : ''}${s.pidsLimited ? ', pids_exceeded' : ''}${s.artifacts ? `, ${s.artifacts} artifact(s) kept` : ''}`), ...outputLines('stdout', s.stdoutTail), ...outputLines('stderr', s.stderrTail)] });
  }
  for (const a of attempts) if (a.state !== 'ended') items.push({ at: a.startedAt, lines: attemptLines('step', a) });
  for (const t of decisionsOf(transitions)) items.push({ at: t.at, lines: [own(decisionLine(t))] });
  return items.sort((x, y) => x.at - y.at).flatMap((x) => x.lines);
}

const firstLine = (s: string) => s.split('\n', 1)[0]!.slice(0, 200);
const RESULT_TAIL = 2000;

/** An agent run's history: the task, each tool call and its result (with live output of calls that did not finish), interruptions and decisions. */
export function agentHistory(entries: readonly Entry[], attempts: readonly AttemptView[], transitions: readonly RunTransition[]): string[] {
  const items: Timed[] = [];
  for (const e of entries) {
    if (e.kind === ENTRY.user) items.push({ at: e.at, lines: [own(`task: ${firstLine((e.body as unknown as UserEntry).text)}`)] });
    else if (e.kind === ENTRY.model) {
      const m = e.body as unknown as ModelEntry;
      const calls = m.toolCalls.map((c) => own(`turn ${m.turn}: tool call ${c.name} ${c.id} ${firstLine(c.arguments)}`));
      items.push({ at: e.at, lines: calls.length ? calls : [own(`turn ${m.turn}: answer (${m.finishReason})`), ...outputLines('stdout', m.content ?? '')] });
    } else if (e.kind === ENTRY.toolResult) {
      const r = e.body as unknown as ToolResultEntry;
      const content = r.content.length > RESULT_TAIL ? `[... ${r.content.length - RESULT_TAIL} characters before ...]\n${r.content.slice(-RESULT_TAIL)}` : r.content;
      items.push({ at: e.at, lines: [own(`tool ${r.name} ${r.toolCallId}: ${r.status}${r.isError ? ' (error)' : ''}`), ...outputLines('stdout', content)] });
    } else if (e.kind === ENTRY.interruption) {
      const i = e.body as unknown as InterruptionEntry;
      items.push({ at: e.at, lines: [own(`turn ${i.turn}: model request attempt ${i.attempt} interrupted: ${i.code}: ${i.message}`)] });
    }
  }
  for (const a of attempts) if (a.state !== 'ended') items.push({ at: a.startedAt, lines: attemptLines('tool', a) });
  for (const t of decisionsOf(transitions)) items.push({ at: t.at, lines: [own(decisionLine(t))] });
  return items.sort((x, y) => x.at - y.at).flatMap((x) => x.lines);
}
