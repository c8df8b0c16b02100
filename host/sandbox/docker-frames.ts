/**
 * Splits Docker's multiplexed attach stream (8-byte header: stream type, 3 zero bytes, big-endian
 * length) into stdout and stderr chunks. Frames may straddle socket reads, so partial headers and
 * payloads are carried over between calls.
 */
export class FrameDemuxer {
  private pending: Buffer = Buffer.alloc(0);
  private remaining = 0;
  private current: 1 | 2 = 1;

  constructor(private readonly emit: (stream: 'stdout' | 'stderr', chunk: Buffer) => void) {}

  push(data: Buffer): void {
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, data]) : data;
    this.pending = Buffer.alloc(0);
    while (buf.length > 0) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, buf.length);
        this.emit(this.current === 2 ? 'stderr' : 'stdout', buf.subarray(0, take));
        this.remaining -= take;
        buf = buf.subarray(take);
        continue;
      }
      if (buf.length < 8) {
        this.pending = Buffer.from(buf);
        return;
      }
      const type = buf[0];
      // Stream type 0 (stdin) never carries output; treat anything but stderr as stdout.
      this.current = type === 2 ? 2 : 1;
      this.remaining = buf.readUInt32BE(4);
      buf = buf.subarray(8);
    }
  }
}
