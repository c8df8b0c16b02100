import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

/** The refusals Node's parser makes before any route runs, by its error code. */
const REFUSALS: Record<string, { status: number; reason: string; code: string; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    code: 'request_headers_too_large',
    message: 'the request line and headers are over the 16 KiB this server reads (a long URL, a large cookie, or too many headers)',
  },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, reason: 'Request Timeout', code: 'request_timeout', message: 'the request was not received in time' },
};
const BAD_REQUEST = { status: 400, reason: 'Bad Request', code: 'bad_request', message: 'the request is not valid HTTP' };

/**
 * Answers what Node's HTTP parser refuses before any route sees the request. Its own answer was a
 * bare `431 Request Header Fields Too Large` with no body, so a program under /api got no code to
 * branch on. The path comes from the bytes the parser held; when they do not start with the request
 * line (headers that arrived in several reads), the answer is JSON, which a person can read too.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const r = REFUSALS[err.code ?? ''] ?? BAD_REQUEST;
    const path = /^[A-Z]+ (\S+)/.exec(err.rawPacket?.subarray(0, 256).toString('latin1') ?? '')?.[1];
    const json = path === undefined || path.startsWith('/api/');
    const body = json ? JSON.stringify({ error: { code: r.code, message: r.message, retryable: false, ids: {} } }) : `${r.status}: ${r.message}`;
    const type = json ? 'application/json' : 'text/plain; charset=UTF-8';
    socket.end(`HTTP/1.1 ${r.status} ${r.reason}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
}
