import { StringDecoder } from 'node:string_decoder';
import { StreamScrubber, type ScrubSecret } from './scrub';

/**
 * One output stream of a command as it may be shown or kept: decoded (a character split across
 * chunks is joined first), scrubbed as it streams, and capped to its head and tail. Scrubbing
 * comes before the cap, so a cut can never leave part of a secret behind, which scrubbing an
 * already capped text cannot promise (the cut may fall inside a value).
 */
export class ScrubbedStream {
  private readonly decoder = new StringDecoder('utf8');
  private readonly scrubber: StreamScrubber;
  private readonly headCap: number;
  private readonly tailCap: number;
  private head = '';
  private tail = '';
  private dropped = 0;

  constructor(secrets: readonly ScrubSecret[], capChars: number) {
    this.scrubber = new StreamScrubber(secrets);
    this.headCap = Math.floor(capChars / 2);
    this.tailCap = capChars - this.headCap;
  }

  /** Takes a raw chunk; returns the text that is now safe to show (possibly empty). */
  push(chunk: Buffer): string {
    return this.keep(this.scrubber.push(this.decoder.write(chunk)));
  }

  /** Ends the stream; returns whatever was held back, scrubbed. */
  end(): string {
    return this.keep(this.scrubber.push(this.decoder.end()) + this.scrubber.end());
  }

  get truncated(): boolean {
    return this.dropped > 0;
  }

  /** The kept text; when characters were dropped, a marker saying how many sits between head and tail. */
  text(): string {
    return this.truncated ? `${this.head}\n[... ${this.dropped} characters truncated ...]\n${this.tail}` : this.head + this.tail;
  }

  private keep(safe: string): string {
    let rest = safe;
    if (this.head.length < this.headCap) {
      const take = rest.slice(0, this.headCap - this.head.length);
      this.head += take;
      rest = rest.slice(take.length);
    }
    if (rest) {
      this.tail += rest;
      if (this.tail.length > this.tailCap) {
        this.dropped += this.tail.length - this.tailCap;
        this.tail = this.tailCap === 0 ? '' : this.tail.slice(-this.tailCap);
      }
    }
    return safe;
  }
}
