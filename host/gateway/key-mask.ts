import { secretForms } from '../secrets';

const MASK = 0x2a; // '*'

/**
 * Masks the provider key in an answer on its way to the sandbox. The answer's bytes otherwise pass
 * unchanged, and a provider that quotes the credential it was given (a 401 saying "Incorrect API
 * key provided: sk-..."; a debugging header) handed the key to the very code it is kept from.
 * Every spelling `secretForms` knows is overwritten with as many `*`: the length stays, so a
 * declared content-length stays true. A key may be split across two chunks of the answer, so the
 * end of a chunk that could begin a spelling is held back until the next chunk (or `end`) shows
 * which it is; an end that begins none, which is every SSE event's `\n\n`, passes at once.
 */
export class KeyMask {
  private readonly forms: Buffer[];
  private carry: Buffer = Buffer.alloc(0);

  constructor(key: string) {
    this.forms = secretForms(key).map((f) => Buffer.from(f, 'utf8'));
  }

  /** The part of the answer so far that is safe to pass on. */
  push(chunk: Buffer): Buffer {
    if (this.forms.length === 0) return chunk;
    // A copy: the provider's chunk is also what the record and the usage are read from.
    const data = this.mask(Buffer.concat([this.carry, chunk]));
    const held = this.heldBack(data);
    this.carry = Buffer.from(data.subarray(data.length - held));
    return data.subarray(0, data.length - held);
  }

  /** What was held back: it began a spelling that never completed, so it is passed as it is. */
  end(): Buffer {
    const rest = this.carry;
    this.carry = Buffer.alloc(0);
    return rest;
  }

  /** Length of the longest end of `data` that is the start of a spelling (shorter than it). */
  private heldBack(data: Buffer): number {
    let held = 0;
    for (const f of this.forms) {
      for (let i = Math.max(0, data.length - f.length + 1); i < data.length - held; i++) {
        if (data[i] === f[0] && data.subarray(i).equals(f.subarray(0, data.length - i))) {
          held = data.length - i;
          break;
        }
      }
    }
    return held;
  }

  /** `text` (a header value, whole) with every spelling of the key masked. */
  maskText(text: string): string {
    return this.forms.length === 0 ? text : this.mask(Buffer.from(text, 'utf8')).toString('utf8');
  }

  /** Longest spellings first (the list's order), so a shorter one never leaves part of a longer one. */
  private mask(data: Buffer): Buffer {
    for (const f of this.forms) for (let i = data.indexOf(f); i >= 0; i = data.indexOf(f, i + f.length)) data.fill(MASK, i, i + f.length);
    return data;
  }
}
