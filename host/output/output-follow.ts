import type { OutputChunk } from '../store/output';

/** One stored chunk of a step's or tool call's output, as a follower sees it (channel `end` closes its attempt). */
export interface OutputEvent extends OutputChunk {
  type: 'output';
}

/**
 * An attempt that will never end: its host died while it ran (a newer attempt of the same step or
 * tool call started, or the run settled without its end). The output events of that attempt
 * before this one are everything it printed: partial output, to be read as such.
 */
export interface InterruptedEvent {
  type: 'interrupted';
  runId: string;
  attempt: string;
  source: string;
  label: string;
  /** The sequence of the attempt's last chunk seen. */
  lastSeq: number;
  why: 'a newer attempt started' | 'the run settled without it';
}

export type FollowedOutput = OutputEvent | InterruptedEvent;

/**
 * Tells, from the chunks a follower has seen in order, when an attempt was cut off. It keeps one
 * open attempt per source (a step or tool call runs one attempt at a time), so its memory is
 * bounded by the sources still open, not by the output's length. A follower that resumed after
 * some chunks knows only the attempts it has seen since.
 */
export class AttemptTracker {
  private readonly open = new Map<string, { attempt: string; label: string; runId: string; lastSeq: number }>();
  private readonly told = new Set<string>();

  /** The events for one chunk: an interruption of the source's previous attempt first, then the chunk. */
  see(c: OutputChunk): FollowedOutput[] {
    const out: FollowedOutput[] = [];
    const prev = this.open.get(c.source);
    if (prev && prev.attempt !== c.attempt) {
      this.open.delete(c.source);
      const cut = this.interrupted(prev, c.source, 'a newer attempt started');
      if (cut) out.push(cut);
    }
    out.push({ type: 'output', ...c });
    // A chunk stored late for an attempt already said to be cut off is shown, but does not reopen it.
    if (this.told.has(c.attempt)) return out;
    if (c.channel === 'end') this.open.delete(c.source);
    else this.open.set(c.source, { attempt: c.attempt, label: c.label, runId: c.runId, lastSeq: c.seq });
    return out;
  }

  /** Every attempt still open once the run has settled and all its chunks were seen: none of them will end. */
  settle(): InterruptedEvent[] {
    const out: InterruptedEvent[] = [];
    for (const [source, a] of this.open) {
      const cut = this.interrupted(a, source, 'the run settled without it');
      if (cut) out.push(cut);
    }
    this.open.clear();
    return out;
  }

  /** An interruption another reader (the server) already announced: said once, whoever saw it first. */
  adopt(e: InterruptedEvent): InterruptedEvent | undefined {
    if (this.open.get(e.source)?.attempt === e.attempt) this.open.delete(e.source);
    return this.interrupted({ ...e }, e.source, e.why);
  }

  private interrupted(a: { attempt: string; label: string; runId: string; lastSeq: number }, source: string, why: InterruptedEvent['why']): InterruptedEvent | undefined {
    if (this.told.has(a.attempt)) return undefined;
    this.told.add(a.attempt);
    // Bounded: a run has as many attempts as it has step and tool executions, and a long-lived follower forgets the oldest.
    if (this.told.size > 10_000) this.told.delete(this.told.values().next().value!);
    return { type: 'interrupted', runId: a.runId, attempt: a.attempt, source, label: a.label, lastSeq: a.lastSeq, why };
  }
}
