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
  /** The newest output sequence (0 when none). */
  lastOutputSeq(): Promise<number>;
}

/** Migration 23's table in each dialect (its own file so parallel branches merge cleanly). */
export const OUTPUT_MIGRATION_NAME = 'live output of steps and tool calls';
