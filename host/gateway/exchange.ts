import type { IncomingMessage, ServerResponse } from 'node:http';

/** A request from the sandbox, as the egress proxy read it (its own parser, or Node's). */
export interface GatewayRequest {
  method: string;
  /** Path and query, origin-form (`/v1/chat/completions`). */
  path: string;
  /** A header's value by lower-cased name. */
  header(name: string): string | undefined;
  /** Every header, by lower-cased name. */
  headers(): Record<string, string>;
  /** The body, or undefined when it was longer than the gateway takes (it was drained, not kept). */
  body: Buffer | undefined;
}

/** The answer to the sandbox. The reply frames the body itself: headers never carry framing. */
export interface GatewayReply {
  /** `length` is the body's length when known; without it the body is sent chunked. */
  head(status: number, headers: ReadonlyArray<readonly [string, string]>, length: number | null): void;
  write(chunk: Buffer): void;
  end(): void;
  /** Cuts the answer short; the client sees a broken answer, not a complete one. */
  destroy(): void;
  readonly headSent: boolean;
  /** Called once if the client goes away before the answer ends. */
  onAbort(cb: () => void): void;
}

/** The gateway as the egress proxy serves it: Node's request and response, or a request its own parser read. */
export interface ProxiedGateway {
  handle(req: IncomingMessage, res: ServerResponse, path: string): void;
  serve(request: GatewayRequest, reply: GatewayReply): void;
}

/** A Node response as a reply. */
export function nodeReply(res: ServerResponse): GatewayReply {
  return {
    head(status, headers, length) {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of headers) {
        const had = out[k];
        out[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
      }
      if (length !== null) out['content-length'] = String(length);
      res.writeHead(status, out);
    },
    write: (chunk) => void res.write(chunk),
    end: () => void res.end(),
    destroy: () => void res.destroy(),
    get headSent() {
      return res.headersSent;
    },
    onAbort(cb) {
      res.on('close', () => {
        if (!res.writableFinished) cb();
      });
    },
  };
}

/** A Node request, its body read whole (up to `limit` bytes), as a gateway request. */
export function readNodeRequest(req: IncomingMessage, path: string, limit: number): Promise<GatewayRequest> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n <= limit) chunks.push(c);
    });
    req.on('end', () => {
      const h = req.headers;
      const header = (name: string) => (typeof h[name] === 'string' ? (h[name] as string) : undefined);
      const headers = () => Object.fromEntries(Object.keys(h).flatMap((k) => (typeof h[k] === 'string' ? [[k, h[k] as string]] : [])));
      resolve({ method: req.method ?? 'GET', path, header, headers, body: n <= limit ? Buffer.concat(chunks) : undefined });
    });
    req.on('error', reject);
  });
}
