/** One running command, as the lease's {@link ExecActivity} sees it. */
export interface CommandToken {
  /** Another command of the lease ran at some time while this one did. */
  overlapped: boolean;
  /** `pid:start` of its wrapper in the container, once the wrapper said it. */
  root: string | undefined;
}

/**
 * The commands running on one lease, for what their wrappers cannot know alone. A wrapper that ends
 * while another berth command runs leaves the leftovers that started after that one (they may be
 * its); the last one to end sweeps them. When two end at once each may leave them to the other, so
 * a command whose life overlapped another's has the host sweep once the lease is idle.
 */
export class ExecActivity {
  private readonly live = new Set<CommandToken>();
  private owed = false;
  private acknowledged: string[] = [];
  /** Forgotten by a mark in the registry (`<id>.ok`), not yet removed from it. */
  private marked: string[] = [];
  /** Exec ids of the commands this lease started: never an earlier host's. */
  readonly started = new Set<string>();

  start(): CommandToken {
    const token: CommandToken = { overlapped: this.live.size > 0, root: undefined };
    for (const other of this.live) other.overlapped = true;
    this.live.add(token);
    return token;
  }

  /** Ends a command; true when the host must sweep the leftovers now (the lease is idle and a sweep is owed). */
  end(token: CommandToken, sweepNeeded: boolean): boolean {
    if (!this.live.delete(token)) return false;
    if (token.overlapped || sweepNeeded) this.owed = true;
    if (this.live.size > 0 || !this.owed) return false;
    this.owed = false;
    return true;
  }

  /** `pid:start` of the wrappers of the commands running now. */
  roots(): string[] {
    return [...this.live].map((t) => t.root).filter((r): r is string => r !== undefined);
  }

  /** The host has this exec's result: the next wrapper removes its registry entry. */
  acknowledge(execId: string): void {
    this.acknowledged.push(execId);
  }

  /**
   * What the next wrapper forgets (exec-scripts.ts): the acknowledged exec ids not yet handed to a
   * wrapper, each marked as forgotten, and, once {@link FORGET_BATCH} marked ones have piled up,
   * `-<id>` for each of those, removed with their marks by one `rm` (at most a few dozen of each).
   */
  takeAcknowledged(): string[] {
    const marks = this.acknowledged.slice(0, 32);
    this.acknowledged = this.acknowledged.slice(marks.length);
    const removes = this.marked.length >= FORGET_BATCH ? this.marked.slice(0, 32) : [];
    this.marked = [...this.marked.slice(removes.length), ...marks];
    return [...marks, ...removes.map((id) => `-${id}`)];
  }

  /** Gives what {@link takeAcknowledged} handed out back when the wrapper it was handed to never started. */
  returnAcknowledged(ids: string[]): void {
    const marks = ids.filter((id) => !id.startsWith('-'));
    const removes = ids.filter((id) => id.startsWith('-')).map((id) => id.slice(1));
    this.marked = [...removes, ...this.marked.filter((id) => !marks.includes(id))];
    this.acknowledged.unshift(...marks);
  }
}

/** Marked registry entries a wrapper removes at once: one `rm` in this many execs. */
export const FORGET_BATCH = 16;
