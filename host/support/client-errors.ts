import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

/** A refusal Node's parser makes before any route runs. */
export interface ClientRefusal {
  status: number;
  reason: string;
  code: string;
  message: string;
}

/** The answer's body for a refusal, given the request path when the bytes held show it. */
export type RenderRefusal = (r: ClientRefusal, path: string | undefined) => { contentType: string; body: string };

const REFUSALS: Record<string, ClientRefusal> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    code: 'request_headers_too_large',
    message: 'the request line and headers are over the 16 KiB this server reads (a long URL, a large cookie, or too many headers)',
  },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, reason: 'Request Timeout', code: 'request_timeout', message: 'the request was not received in time' },
};
const BAD_REQUEST: ClientRefusal = { status: 400, reason: 'Bad Request', code: 'bad_request', message: 'the request is not valid HTTP' };

/**
 * Answers what Node's HTTP parser refuses before any handler sees the request. Its own answer was
 * a bare `431 Request Header Fields Too Large` with no body, so a program (berth serve's /api, an
 * MCP client) got no code to branch on. The path comes from the bytes the parser held, when they
 * start with the request line (headers that arrived in several reads do not).
 */
export function answerClientErrors(server: Server, render: RenderRefusal): void {
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const r = REFUSALS[err.code ?? ''] ?? BAD_REQUEST;
    const path = /^[A-Z]+ (\S+)/.exec(err.rawPacket?.subarray(0, 256).toString('latin1') ?? '')?.[1];
    const { contentType, body } = render(r, path);
    socket.end(`HTTP/1.1 ${r.status} ${r.reason}\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
}
