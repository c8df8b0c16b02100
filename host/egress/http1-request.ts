/**
 * A strict parser of the request heads a sandbox sends to its egress proxy: origin-form (the model
 * gateway's, every request shape of the OpenAI API clients) and absolute-form `http://` (a proxied
 * GET), HTTP/1.1 with a Content-Length or no body. The bytes are hostile and sit next to the
 * provider key, so it accepts one spelling of each thing and refuses what could be read two ways; a
 * well-formed request of another shape (CONNECT, another scheme, HTTP/1.0, a chunked body,
 * `Expect`, an upgrade) is `other`: the caller hands the connection, from that request on, to Node's
 * own strict parser, which served every request before this one existed.
 */

/** Bound on a request's head (request line and headers); larger ones are refused with 431. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Bound on the number of header lines. */
export const MAX_HEADER_LINES = 100;
/** Bound on the request target. */
export const MAX_TARGET_CHARS = 2048;

export interface RequestHead {
  method: string;
  /** Origin-form (the path and query) or absolute-form (`http://host:port/path?query`). */
  target: string;
  /** The target is absolute-form. */
  absolute: boolean;
  /** Lower-cased names; a name sent twice is refused if it frames or routes the request, else joined with ", " (RFC 9110 5.3). */
  headers: Map<string, string>;
  contentLength: number;
  /** `Connection: close` was sent: the connection ends after this exchange. */
  close: boolean;
  /** Bytes of the head, the blank line included: the body starts there. */
  headBytes: number;
}

export type HeadParse =
  | { kind: 'more' }
  | { kind: 'request'; head: RequestHead }
  | { kind: 'other'; why: string }
  | { kind: 'refused'; status: 400 | 414 | 431; reason: string; method: string; target: string };

const METHOD = /^[A-Z]{1,20}$/;
/** RFC 3986 path and query characters, with every `%` starting a two-digit escape. */
const ORIGIN_TARGET = /^\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/;
/** `http://` and an authority of a name, an IPv4 or a bracketed IPv6 address and a port, no user info; then an origin-form path, or none. */
const ABSOLUTE_TARGET = /^http:\/\/(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?:\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const LENGTH = /^\d{1,15}$/;
/** Headers that frame or route the request: a second one is an attempt to be read two ways. */
const SINGLE = new Set(['content-length', 'transfer-encoding', 'host', 'content-type', 'authorization', 'expect', 'upgrade']);

const CR = 13;
const LF = 10;

/**
 * The byte a head may not hold, or -1: control characters (HTAB aside), DEL, bytes above 0x7E, and
 * a CR or LF that is not part of a CRLF. `from` lets a caller resume a scan it already made.
 */
function badByte(buf: Buffer, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const b = buf[i]!;
    if (b >= 0x20 && b <= 0x7e) continue;
    if (b === 0x09) continue;
    if (b === CR && (i + 1 === buf.length || buf[i + 1] === LF)) continue;
    if (b === LF && i > 0 && buf[i - 1] === CR) continue;
    return i;
  }
  return -1;
}

/** Parses the head of the request starting at `buf[0]`. */
export function parseRequestHead(buf: Buffer): HeadParse {
  const scan = Math.min(buf.length, MAX_HEAD_BYTES + 4);
  const end = buf.indexOf('\r\n\r\n', 0, 'latin1');
  const firstLine = (): { method: string; target: string } => {
    const m = /^([A-Z]{1,20}) (\S{1,2048})/.exec(buf.toString('latin1', 0, Math.min(buf.length, 2100)));
    return { method: m?.[1] ?? '?', target: m?.[2] ?? '' };
  };
  const refuse = (status: 400 | 414 | 431, reason: string): HeadParse => ({ kind: 'refused', status, reason, ...firstLine() });
  const headEnd = end >= 0 && end <= MAX_HEAD_BYTES ? end : -1;
  const bad = badByte(buf, 0, headEnd >= 0 ? headEnd + 4 : scan);
  if (bad >= 0) {
    const b = buf[bad]!;
    return refuse(400, b === CR ? 'bare CR in the request head' : b === LF ? 'bare LF in the request head' : `byte 0x${b.toString(16).padStart(2, '0')} in the request head`);
  }
  if (headEnd < 0) return buf.length > MAX_HEAD_BYTES ? refuse(431, `headers larger than ${MAX_HEAD_BYTES} bytes`) : { kind: 'more' };

  const lines = buf.toString('latin1', 0, headEnd).split('\r\n');
  const parts = lines[0]!.split(' ');
  if (parts.length !== 3) return refuse(400, 'the request line is not METHOD SP TARGET SP VERSION');
  const [method, target, version] = parts as [string, string, string];
  if (!METHOD.test(method)) return refuse(400, 'invalid method');
  if (target.length > MAX_TARGET_CHARS) return refuse(414, `request target longer than ${MAX_TARGET_CHARS} characters`);
  if (version !== 'HTTP/1.1') return version === 'HTTP/1.0' ? { kind: 'other', why: 'HTTP/1.0' } : refuse(400, 'invalid HTTP version');
  const absolute = !target.startsWith('/');
  if (absolute && !target.startsWith('http://')) return { kind: 'other', why: 'neither origin-form nor http:// absolute-form' };
  if (!(absolute ? ABSOLUTE_TARGET : ORIGIN_TARGET).test(target)) return refuse(400, 'invalid request target');
  if (lines.length - 1 > MAX_HEADER_LINES) return refuse(431, `more than ${MAX_HEADER_LINES} header lines`);

  const headers = new Map<string, string>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.length === 0) return refuse(400, 'empty header line');
    // Obsolete line folding (RFC 9112 5.2): a header read as one by one parser and two by another.
    if (line.charCodeAt(0) === 0x20 || line.charCodeAt(0) === 0x09) return refuse(400, 'obsolete line folding');
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    // No whitespace between a name and its colon (RFC 9112 5.1): `Content-Length : 5` is refused.
    if (!TOKEN.test(name)) return refuse(400, 'invalid header name');
    const key = name.toLowerCase();
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    const had = headers.get(key);
    if (had !== undefined) {
      if (SINGLE.has(key)) return refuse(400, `duplicate ${name} header`);
      headers.set(key, `${had}, ${value}`);
    } else headers.set(key, value);
  }

  const te = headers.get('transfer-encoding');
  const cl = headers.get('content-length');
  if (te !== undefined && cl !== undefined) return refuse(400, 'Transfer-Encoding with Content-Length');
  if (cl !== undefined && !LENGTH.test(cl)) return refuse(400, 'invalid Content-Length');
  const host = headers.get('host');
  if (host === undefined || host.length === 0) return refuse(400, 'no Host header');
  const connection = (headers.get('connection') ?? '').toLowerCase().split(',').map((t) => t.trim());
  if (te !== undefined) return { kind: 'other', why: 'Transfer-Encoding' };
  if (headers.has('expect')) return { kind: 'other', why: 'Expect' };
  if (headers.has('upgrade') || connection.includes('upgrade')) return { kind: 'other', why: 'Upgrade' };
  return { kind: 'request', head: { method, target, absolute, headers, contentLength: cl === undefined ? 0 : Number(cl), close: connection.includes('close'), headBytes: headEnd + 4 } };
}
