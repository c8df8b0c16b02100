/** Longer than any `berth-exec PID START` line: a first line past this is not the wrapper's. */
const MAX_LINE = 128;

/**
 * Takes the wrapper's first stdout line (`<name> <pid> <start>`, see exec-scripts.ts) off a
 * command's output and passes everything after it on. The wrapper prints it before the command
 * exists, so the command cannot write anything before it: the first line is always the wrapper's.
 */
export class WrapperLine {
  /** `pid:start` of the wrapper in the container; undefined when the wrapper never said it. */
  readonly root: Promise<string | undefined>;
  private resolve!: (root: string | undefined) => void;
  private head: Buffer | undefined = Buffer.alloc(0);

  constructor(
    private readonly name: string,
    private readonly pass: (chunk: Buffer) => void,
  ) {
    this.root = new Promise((r) => (this.resolve = r));
  }

  push(chunk: Buffer): void {
    if (this.head === undefined) return this.pass(chunk);
    const head = Buffer.concat([this.head, chunk]);
    const nl = head.indexOf(0x0a);
    if (nl < 0 && head.length <= MAX_LINE) {
      this.head = head;
      return;
    }
    this.head = undefined;
    const m = nl < 0 ? null : new RegExp(`^${this.name} (\\d+) (\\d+)$`).exec(head.subarray(0, nl).toString('latin1'));
    this.resolve(m ? `${m[1]}:${m[2]}` : undefined);
    const rest = m ? head.subarray(nl + 1) : head;
    if (rest.length > 0) this.pass(rest);
  }

  /** The output ended: whatever was held back is the command's. */
  end(): void {
    if (this.head === undefined) return;
    const held = this.head;
    this.head = undefined;
    this.resolve(undefined);
    if (held.length > 0) this.pass(held);
  }
}
