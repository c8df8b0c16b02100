import type { ExecUsage } from './exec-usage';
/** Which stream an output chunk came from. */
export type OutputStream = 'stdout' | 'stderr';

export interface ExecOptions {
  /** Working directory; relative paths are taken from the workspace. Default: the workspace. */
  cwd?: string;
  /** Extra environment for this exec only (not visible in `docker inspect`). */
  env?: Record<string, string>;
  /** Bytes written to the command's stdin, which is then closed. */
  stdin?: string | Buffer;
  /** Kill the whole process tree after this long. Default: the spec's commandTimeoutS; 0 = none. */
  timeoutMs?: number;
  /**
   * A `performance.now()` instant at which the tree is killed too (`timedOut`), whatever
   * `timeoutMs` says: a caller's clock that began before this exec's setup (an agent run's
   * command budget), so the time the setup took is not given to the command again. Already
   * passed: the command is killed as soon as it starts.
   */
  deadline?: number;
  /** Aborting kills the whole process tree; the result says `cancelled`. */
  signal?: AbortSignal;
  /** Receives every chunk as it arrives, before any truncation. */
  onOutput?: (stream: OutputStream, chunk: Buffer) => void;
  /** `uid:gid` or a user name known in the image. Default: the workspace owner (never root). */
  user?: string;
  /** Bytes kept per stream (head and tail halves). Default: the host's outputCapBytes. */
  outputCapBytes?: number;
  /**
   * Who started the command, e.g. a task id and attempt (1-200 printable ASCII characters, not
   * secret: commands can see it). It travels in the exec's own process config, which the engine
   * keeps per exec, so a later host reads it back after this one crashed
   * (`Lease.stopEarlierCommands`).
   */
  tag?: string;
  /**
   * Keep what the command leaves running in the background (a service for later commands). By
   * default every process the command left is killed when the command ends, however it ends,
   * `setsid` or not, so nothing carries into the next command (and reads its environment and
   * secrets through /proc). Kept processes are recorded, and every later sweep and host leaves them.
   */
  keepProcesses?: boolean;
  /**
   * Measure what the command cost from the container's cgroup counters (CPU time, memory over
   * time; see exec-usage.ts): the result's `usage`. Off by default (it costs engine calls).
   */
  measure?: boolean;
}

/**
 * The outcome of one command. Every way a command can end is a value here; only a sandbox that
 * cannot run commands at all (container gone, engine unreachable) throws.
 */
export interface ExecResult {
  /** The command's exit code; 128+n when it died of signal n; -1 when it could not be learned. */
  exitCode: number;
  timedOut: boolean;
  cancelled: boolean;
  /** Something in this exec's time window was killed by the memory limit. */
  oomKilled: boolean;
  /** A fork was refused by the pids limit during this exec. */
  pidsLimited: boolean;
  /** The writable layer went over diskMb (the tree was killed) or a file hit the size cap. */
  diskExceeded: boolean;
  /**
   * The container stopped, restarted or vanished while the command ran (killed or removed from
   * outside): the exit code (`-1`) says nothing about the command, which may or may not have done
   * its work. The lease is `lost` from then on.
   */
  sandboxLost: boolean;
  /**
   * The command was never started: cancelled before the engine started it (the signal was already
   * aborted, or aborted while the sandbox was paused). Nothing of it ran; `cancelled` is true too.
   */
  notStarted?: boolean;
  durationMs: number;
  stdout: string;
  stderr: string;
  /** Bytes each stream produced in total, including what truncation dropped. */
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  /** With `measure`: the container's CPU and memory use over this exec (absent when not measured or unreadable). */
  usage?: ExecUsage;
}
