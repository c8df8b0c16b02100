import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The largest message line read (the SDK's own stdio transport stops at 10 MiB too). */
export const STDIO_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;
/** The end of an oversized line kept to find its request id: the SDK's client writes `"id"` last. */
const TAIL_BYTES = 256;

/**
 * MCP over stdin/stdout, one JSON-RPC message a line, like the SDK's `StdioServerTransport`, but a
 * line that cannot be taken does not end the server. The SDK's transport closed itself on a line
 * over its 10 MiB buffer (a `write_file` of a large generated file), and `berth mcp` took the close
 * for the client's end: it exited 0, said nothing, and the client saw its connection go. Here an
 * oversized line is skipped to its end and answered with a JSON-RPC error naming its size and the
 * limit (with its request id when the line's end names one), and a line that is not a JSON-RPC
 * message is answered with a parse error; either way the next line is read as usual.
 */
export class LineStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private chunks: Buffer[] = [];
  private size = 0;
  /** Set while the current line is over the limit: only its byte count and its end are kept. */
  private over: { bytes: number; tail: Buffer } | null = null;
  private closed = false;

  constructor(
    private readonly input: NodeJS.ReadableStream = process.stdin,
    private readonly output: NodeJS.WritableStream = process.stdout,
    private readonly maxBytes = STDIO_MAX_MESSAGE_BYTES,
  ) {}

  async start(): Promise<void> {
    this.input.on('data', this.onData);
    this.input.on('error', this.onInputError);
    this.input.once('end', this.onEnd);
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.output.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.output.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.input.off('data', this.onData);
    this.input.off('error', this.onInputError);
    this.input.off('end', this.onEnd);
    this.chunks = [];
    this.over = null;
    this.onclose?.();
  }

  private readonly onInputError = (err: Error) => this.onerror?.(err);
  private readonly onEnd = () => void this.close();

  private readonly onData = (data: Buffer | string) => {
    let chunk = typeof data === 'string' ? Buffer.from(data) : data;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a)) {
      this.take(chunk.subarray(0, nl));
      this.lineEnded();
      chunk = chunk.subarray(nl + 1);
    }
    if (chunk.length > 0) this.take(chunk);
  };

  private take(part: Buffer): void {
    if (this.over) {
      this.over.bytes += part.length;
      this.over.tail = Buffer.concat([this.over.tail, part]).subarray(-TAIL_BYTES);
      return;
    }
    this.size += part.length;
    this.chunks.push(part);
    if (this.size > this.maxBytes) {
      this.over = { bytes: this.size, tail: Buffer.concat(this.chunks).subarray(-TAIL_BYTES) };
      this.chunks = [];
      this.size = 0;
    }
  }

  /** Answers a line that cannot be taken, with no id (none can be trusted), and says so on stderr. */
  private refuse(code: number, name: string, what: string): void {
    this.onerror?.(new Error(`${name}: ${what}`));
    void this.send({ jsonrpc: '2.0', id: null as unknown as string, error: { code, message: `${name}: ${what}`, data: { code: name } } });
  }

  private lineEnded(): void {
    if (this.over) {
      const { bytes, tail } = this.over;
      this.over = null;
      const id = idAtEnd(tail.toString('utf8'));
      this.onerror?.(new Error(`a message of ${bytes} bytes is over the limit of ${this.maxBytes} bytes; answered with an error${id === null ? ' (no request id found)' : ` to request ${JSON.stringify(id)}`}`));
      void this.send({ jsonrpc: '2.0', id: id as string | number, error: { code: -32600, message: `request_too_large: the message is ${bytes} bytes; berth mcp reads messages up to ${this.maxBytes} bytes on stdio (write a large file in parts, or produce it with exec)`, data: { code: 'request_too_large', bytes, limit: this.maxBytes } } });
      return;
    }
    const line = Buffer.concat(this.chunks).toString('utf8').replace(/\r$/, '');
    this.chunks = [];
    this.size = 0;
    if (line.trim() === '') return;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      this.refuse(-32700, 'parse_error', `a line of stdin is not a JSON-RPC message: it is not JSON (${err instanceof Error ? err.message.slice(0, 200) : String(err)})`);
      return;
    }
    // JSON that is no JSON-RPC message (an object as id, a batch) is an invalid request (-32600),
    // not a parse error; its zod issues went out as a multi-line dump of the whole union.
    const parsed = JSONRPCMessageSchema.safeParse(json);
    if (!parsed.success) {
      this.refuse(-32600, 'invalid_request', `a line of stdin ${notJsonRpc(json, parsed.error.issues[0], 'a batch: send one message a line')}`);
      return;
    }
    this.onmessage?.(parsed.data);
  }
}

/** Why a JSON value is no JSON-RPC message, in one line (shared with `berth mcp --http`). */
export function notJsonRpc(json: unknown, issue: { path: PropertyKey[]; message: string } | undefined, batch: string): string {
  const where = issue?.path.length ? ` at ${issue.path.map(String).join('.')}` : '';
  return `is JSON but not a JSON-RPC 2.0 message${where} (${Array.isArray(json) ? batch : (issue?.message ?? 'invalid')}); a request needs "jsonrpc":"2.0", a string or number "id" and a "method"`;
}

/** The request id a JSON object ends with (`..., "id": 7}`), or null. */
function idAtEnd(tail: string): string | number | null {
  const m = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail);
  if (!m) return null;
  return m[1]!.startsWith('"') ? (JSON.parse(m[1]!) as string) : Number(m[1]);
}
