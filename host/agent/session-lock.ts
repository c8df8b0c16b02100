/**
 * One-at-a-time access per key, in arrival order. Tool calls of a session take turns in its
 * sandbox, so each workspace digest is measured with no other call changing the files and the
 * newest measurement is the sandbox's state. In memory only: a new process starts unlocked,
 * which is right, since nothing of the old one is running.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = before.then(() => mine);
    this.tails.set(key, tail);
    await before;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
