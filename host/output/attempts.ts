import type { OutputChunk } from '../store/output';

/** One piece of an attempt's output in print order; `cut` marks where the cap left bytes out. */
export type OutputPart = { channel: 'stdout' | 'stderr' | 'cut'; text: string };

/** One execution of a step or tool call, as its stored chunks tell it. */
export interface OutputAttempt {
  attempt: string;
  source: string;
  label: string;
  startedAt: number;
  lastAt: number;
  parts: OutputPart[];
  cutBytes: number;
  /** How it ended (`exit 0`, `timed out`, …); null when no end was written: still running, or cut off by a crash. */
  end: string | null;
  /** The newest chunk's sequence: a live reader appends only chunks after it. */
  lastSeq: number;
}

/** Whether an attempt with no end is still going: only the newest attempt of its source, while the run is live. */
export type AttemptState = 'ended' | 'running' | 'interrupted';

/** Groups chunks (in sequence order) into attempts, ordered by when each started. */
export function attemptsOf(chunks: readonly OutputChunk[]): OutputAttempt[] {
  const byId = new Map<string, OutputAttempt>();
  for (const c of chunks) {
    let a = byId.get(c.attempt);
    if (!a) byId.set(c.attempt, (a = { attempt: c.attempt, source: c.source, label: c.label, startedAt: c.at, lastAt: c.at, parts: [], cutBytes: 0, end: null, lastSeq: c.seq }));
    a.lastAt = c.at;
    a.lastSeq = Math.max(a.lastSeq, c.seq);
    if (c.cutBytes > a.cutBytes) {
      a.parts.push({ channel: 'cut', text: `[... ${c.cutBytes - a.cutBytes} bytes cut ...]` });
      a.cutBytes = c.cutBytes;
    }
    if (c.channel === 'end') {
      a.end = c.text;
      continue;
    }
    const last = a.parts[a.parts.length - 1];
    if (last && last.channel === c.channel) last.text += c.text;
    else a.parts.push({ channel: c.channel, text: c.text });
  }
  return [...byId.values()];
}

/**
 * An attempt without an end was cut off unless it is the newest of its source and the run is
 * still live (a host may be running it now).
 */
export function attemptState(a: OutputAttempt, all: readonly OutputAttempt[], runLive: boolean): AttemptState {
  if (a.end !== null) return 'ended';
  const newest = all.filter((x) => x.source === a.source).at(-1);
  return runLive && newest?.attempt === a.attempt ? 'running' : 'interrupted';
}
