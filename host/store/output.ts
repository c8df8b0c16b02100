/** Which stream a chunk of live output came from; `end` closes an attempt (its text says how it ended). */
export type OutputChannel = 'stdout' | 'stderr' | 'end';

/** One bounded, scrubbed chunk of a command's output, written while the command runs. */
export interface NewOutputChunk {
  runId: string;
  /** What printed it: `step:<index>` for a plan step, `tool:<toolCallId>` for an agent tool call. */
  source: string;
  /** The step's or tool's name, for readers. */
  label: string;
  /** One execution of the source (a step run again after a crash is a new attempt). */
  attempt: string;
  /** The chunk's number within its attempt, from 0: (attempt, n) is unique, so a retried write lands once. */
  n: number;
  channel: OutputChannel;
  at: number;
  /** Already scrubbed of the run's secrets. */
  text: string;
  /** Bytes of this attempt's output left out so far by the cap (the `end` chunk has the total). */
  cutBytes: number;
}

/** A chunk as stored, with its store-wide sequence (readers follow it with `afterSeq`). */
export interface OutputChunk extends NewOutputChunk {
  seq: number;
}

/**
 * Live output of steps and tool calls: append-only rows beside the commits (not session state, so
 * not a commit), durable as they are written, so a crash keeps what the command printed until then.
 */
export interface OutputRecords {
  appendOutput(chunks: NewOutputChunk[]): Promise<void>;
  /** Oldest first; `afterSeq` is exclusive. A reader that saw up to N and asks after N misses nothing. */
  listOutput(filter: { runId?: string; afterSeq?: number; limit?: number }): Promise<OutputChunk[]>;
  /**
   * What a page shows of a run's output, without reading the rest of it: for each attempt its first
   * chunk (when it started), its end chunk, and its newest chunks holding at least `chars` characters
   * of output (all of them when it printed less), oldest first. Grouped into attempts they give the
   * same start, end, cut count and last `chars` characters as all of the run's chunks do: a run page
   * of a step that printed 64 MB read all of it at every render (0.5 s, 600 MB resident).
   */
  listOutputTails(runId: string, chars: number): Promise<OutputChunk[]>;
  /** The newest output sequence (0 when none). */
  lastOutputSeq(): Promise<number>;
}

/** How a dialect reads one attempt: its first chunk, and its chunks numbered below `beforeN`, newest first. */
export interface AttemptReads {
  first(attempt: string): Promise<OutputChunk | undefined>;
  newest(attempt: string, beforeN: number, limit: number): Promise<OutputChunk[]>;
}

/** Rows of one read back through an attempt: enough for what is left to read, never more than this. */
const MAX_ROWS = 256;

/**
 * {@link OutputRecords.listOutputTails} over a dialect's reads: each attempt walked back from its
 * newest chunk in reads sized by the chunks seen so far (a chunk holds 1 to 32,000 characters),
 * until `chars` characters of output are read.
 */
export async function outputTails(attempts: readonly string[], reads: AttemptReads, chars: number): Promise<OutputChunk[]> {
  const out = new Map<number, OutputChunk>();
  for (const attempt of attempts) {
    let got = 0;
    let rows = 0;
    // Past any chunk number (PostgreSQL keeps `n` as a 4-byte integer).
    let beforeN = 2 ** 31 - 1;
    while (got < chars) {
      const perRow = rows ? Math.max(1, got / rows) : chars;
      const limit = Math.min(MAX_ROWS, Math.max(2, Math.ceil((chars - got) / perRow) + 1));
      const page = await reads.newest(attempt, beforeN, limit);
      for (const c of page) {
        out.set(c.seq, c);
        if (c.channel !== 'end') (got += c.text.length), rows++;
        beforeN = Math.min(beforeN, c.n);
      }
      if (page.length < limit) break;
    }
    // Its start time is its first chunk's; a walk that reached chunk 0 has it already.
    const first = beforeN > 0 ? await reads.first(attempt) : undefined;
    if (first) out.set(first.seq, first);
  }
  return [...out.values()].sort((a, b) => a.seq - b.seq);
}

/** Migration 23's table in each dialect (its own file so parallel branches merge cleanly). */
export const OUTPUT_MIGRATION_NAME = 'live output of steps and tool calls';
