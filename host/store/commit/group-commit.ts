/** What one member of a group got: its own answer, or the error only it ran into. */
export type MemberOutcome<R> = { value: R } | { error: unknown };

/**
 * Writes a group of commits in one transaction and answers each member on its own (a member
 * refused by its fence or its compare-and-set, or one that threw, leaves the others written).
 * It resolves only once the transaction is durable; a throw fails every member (nothing written).
 */
export type GroupWrite<I, R> = (inputs: I[]) => Promise<Array<MemberOutcome<R>>>;

interface Member<I, R> {
  input: I;
  resolve(value: R): void;
  reject(error: unknown): void;
}

/** More members than this wait for the next transaction: one huge group would hold every caller behind its slowest statement. */
export const MAX_GROUP = 64;

/**
 * Group commit: the commits asked for in one turn of the event loop are written together, in one
 * transaction and so one flush to disk, instead of one flush each. A store whose writes are
 * synchronous (better-sqlite3) blocks the loop for each flush; concurrent runs' phases end in the
 * same turn (their commits' answers arrive together), so their next commits queue behind one
 * `setImmediate` and share the next flush.
 *
 * Order: members are written in the order they were asked for, and one group at a time, so two
 * commits of one session asked for in order are applied in that order. A caller's promise settles
 * after its group's transaction is durable, never before.
 */
export class GroupCommit<I, R> {
  private queue: Array<Member<I, R>> = [];
  private flushing: Promise<void> | null = null;
  private scheduled = false;

  constructor(
    private readonly write: GroupWrite<I, R>,
    private readonly maxGroup = MAX_GROUP,
  ) {}

  commit(input: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves once every commit asked for so far has been answered. */
  async idle(): Promise<void> {
    while (this.flushing || this.queue.length > 0 || this.scheduled) await (this.flushing ?? new Promise((r) => setImmediate(r)));
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flushing = this.flush().finally(() => {
        this.flushing = null;
        if (this.queue.length > 0) this.schedule();
      });
    });
  }

  private async flush(): Promise<void> {
    const group = this.queue.splice(0, this.maxGroup);
    if (group.length === 0) return;
    let outcomes: Array<MemberOutcome<R>>;
    try {
      outcomes = await this.write(group.map((m) => m.input));
    } catch (err) {
      for (const m of group) m.reject(err);
      return;
    }
    group.forEach((m, i) => {
      const o = outcomes[i];
      if (!o) m.reject(new Error(`group commit answered ${outcomes.length} of ${group.length} members`));
      else if ('error' in o) m.reject(o.error);
      else m.resolve(o.value);
    });
  }
}
