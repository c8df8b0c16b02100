import { describe, expect, it } from 'vitest';
import { MAX_HEAD_BYTES, parseRequestHead, type HeadParse } from '../../host/egress/http1-request';

const parse = (text: string): HeadParse => parseRequestHead(Buffer.from(text, 'latin1'));
const refusal = (text: string) => {
  const p = parse(text);
  if (p.kind !== 'refused') throw new Error(`expected a refusal, got ${p.kind}`);
  return [p.status, p.reason];
};
const POST = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 10.0.0.1:3128\r\n';

describe('the strict request head parser of the egress proxy', () => {
  it('reads an origin-form request: method, target, lower-cased headers, length, where the body starts', () => {
    const text = `${POST}Content-Type: application/json\r\nContent-Length: 12\r\nX-Two: a\r\nX-Two: b\r\n\r\n{"model":1}\n`;
    const p = parse(text);
    expect(p.kind).toBe('request');
    if (p.kind !== 'request') return;
    expect(p.head).toMatchObject({ method: 'POST', target: '/v1/chat/completions', absolute: false, contentLength: 12, close: false, headBytes: text.length - 12 });
    expect(Object.fromEntries(p.head.headers)).toEqual({ host: '10.0.0.1:3128', 'content-type': 'application/json', 'content-length': '12', 'x-two': 'a, b' });
  });

  it('reads an absolute-form http:// GET and a Connection: close', () => {
    const p = parse('GET http://example.test:8080/a/b?c=d HTTP/1.1\r\nHost: example.test:8080\r\nConnection: close\r\n\r\n');
    expect(p).toMatchObject({ kind: 'request', head: { method: 'GET', target: 'http://example.test:8080/a/b?c=d', absolute: true, contentLength: 0, close: true } });
  });

  it('waits for more bytes while the head is incomplete', () => {
    expect(parse(`${POST}Content-Length: 2\r\n`).kind).toBe('more');
    expect(parse(`${POST}Content-Length: 2\r`).kind).toBe('more');
  });

  it('leaves to Node\'s server the well-formed shapes it does not serve: CONNECT, https://, HTTP/1.0, a chunked body, Expect, Upgrade', () => {
    const other = (t: string) => parse(t).kind;
    expect(other('CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n')).toBe('other');
    expect(other('GET https://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n')).toBe('other');
    expect(other('GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n')).toBe('other');
    expect(other(`${POST}Transfer-Encoding: chunked\r\n\r\n`)).toBe('other');
    expect(other(`${POST}Expect: 100-continue\r\nContent-Length: 2\r\n\r\n`)).toBe('other');
    expect(other('GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n')).toBe('other');
  });

  it('refuses Content-Length with Transfer-Encoding, a repeated Content-Length (even the same value) and a length that is not plain digits', () => {
    expect(refusal(`${POST}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n`)).toEqual([400, 'Transfer-Encoding with Content-Length']);
    expect(refusal(`${POST}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n`)).toEqual([400, 'Transfer-Encoding with Content-Length']);
    expect(refusal(`${POST}Content-Length: 5\r\nContent-Length: 6\r\n\r\n`)).toEqual([400, 'duplicate Content-Length header']);
    expect(refusal(`${POST}Content-Length: 5\r\ncontent-length: 5\r\n\r\n`)).toEqual([400, 'duplicate content-length header']);
    for (const v of ['+5', '5, 5', '0x10', '-1', '5 5', '']) expect(refusal(`${POST}Content-Length: ${v}\r\n\r\n`)).toEqual([400, 'invalid Content-Length']);
  });

  it('refuses obsolete line folding, whitespace before a colon, an empty or invalid header name', () => {
    expect(refusal(`${POST}X-A: one\r\n two\r\n\r\n`)).toEqual([400, 'obsolete line folding']);
    expect(refusal(`${POST}X-A: one\r\n\ttwo\r\n\r\n`)).toEqual([400, 'obsolete line folding']);
    expect(refusal(`${POST}Content-Length : 5\r\n\r\n`)).toEqual([400, 'invalid header name']);
    expect(refusal(`${POST}: empty\r\n\r\n`)).toEqual([400, 'invalid header name']);
    expect(refusal(`${POST}X(A): 1\r\n\r\n`)).toEqual([400, 'invalid header name']);
    expect(refusal(`${POST}no colon here\r\n\r\n`)).toEqual([400, 'invalid header name']);
  });

  it('refuses a bare CR or a bare LF anywhere in the head, and control or non-ASCII bytes', () => {
    expect(refusal(`${POST}X-A: 1\nContent-Length: 5\r\n\r\n`)).toEqual([400, 'bare LF in the request head']);
    expect(refusal(`${POST}X-A: 1\rContent-Length: 5\r\n\r\n`)).toEqual([400, 'bare CR in the request head']);
    expect(refusal('POST /v1/x HTTP/1.1\nHost: x\n\n')).toEqual([400, 'bare LF in the request head']);
    // An incomplete head is refused as soon as it holds one, not when it ends.
    expect(refusal(`${POST}X-A: 1\n`)).toEqual([400, 'bare LF in the request head']);
    expect(refusal(`${POST}X-A: a\u0000b\r\n\r\n`)).toEqual([400, 'byte 0x00 in the request head']);
    expect(refusal(`${POST}X-A: caf\u00e9\r\n\r\n`)).toEqual([400, 'byte 0xe9 in the request head']);
    expect(refusal(`${POST}X-A: \u007f\r\n\r\n`)).toEqual([400, 'byte 0x7f in the request head']);
  });

  it('refuses a request line that is not METHOD SP TARGET SP HTTP/1.1, an invalid method or target', () => {
    expect(refusal('POST  /v1/x HTTP/1.1\r\nHost: x\r\n\r\n')).toEqual([400, 'the request line is not METHOD SP TARGET SP VERSION']);
    expect(refusal('POST /v1/x HTTP/1.1 \r\nHost: x\r\n\r\n')).toEqual([400, 'the request line is not METHOD SP TARGET SP VERSION']);
    expect(refusal('\r\nPOST /v1/x HTTP/1.1\r\nHost: x\r\n\r\n')).toEqual([400, 'the request line is not METHOD SP TARGET SP VERSION']);
    expect(refusal('post /v1/x HTTP/1.1\r\nHost: x\r\n\r\n')).toEqual([400, 'invalid method']);
    expect(refusal('POST /v1/x HTTP/2.0\r\nHost: x\r\n\r\n')).toEqual([400, 'invalid HTTP version']);
    expect(refusal('POST /v1/x HTTP/1.10\r\nHost: x\r\n\r\n')).toEqual([400, 'invalid HTTP version']);
    for (const t of ['/v1/"x"', '/v1/<x>', '/v1/%zz', '/v1/x#frag', '/v1/{x}', 'http://user@example.test/', 'http://exa mple/']) {
      expect([t, ...refusal(`GET ${t} HTTP/1.1\r\nHost: x\r\n\r\n`)]).toEqual(t.includes(' ') ? [t, 400, 'the request line is not METHOD SP TARGET SP VERSION'] : [t, 400, 'invalid request target']);
    }
    expect(refusal(`GET /${'a'.repeat(2048)} HTTP/1.1\r\nHost: x\r\n\r\n`)).toEqual([414, 'request target longer than 2048 characters']);
  });

  it('refuses a request with no Host or two of them, and two of any header that frames or routes the request', () => {
    expect(refusal('POST /v1/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n')).toEqual([400, 'no Host header']);
    expect(refusal(`${POST}Host: other\r\n\r\n`)).toEqual([400, 'duplicate Host header']);
    for (const h of ['Content-Type', 'Authorization', 'Transfer-Encoding']) expect(refusal(`${POST}${h}: a\r\n${h}: a\r\n\r\n`)).toEqual([400, `duplicate ${h} header`]);
  });

  it('refuses a head over the size bound or with too many header lines, with 431', () => {
    expect(refusal(`${POST}X-Pad: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`)).toEqual([431, `headers larger than ${MAX_HEAD_BYTES} bytes`]);
    // Still incomplete, but already past the bound: refused without waiting for its end.
    expect(refusal(`${POST}X-Pad: ${'a'.repeat(MAX_HEAD_BYTES)}`)).toEqual([431, `headers larger than ${MAX_HEAD_BYTES} bytes`]);
    expect(refusal(`${POST}${Array.from({ length: 101 }, (_, i) => `X-${i}: 1\r\n`).join('')}\r\n`)).toEqual([431, 'more than 100 header lines']);
  });

  it('names the method and target of a refused request for the audit, when its first line has them', () => {
    expect(parse(`${POST}Content-Length: 1\r\nContent-Length: 2\r\n\r\n`)).toMatchObject({ kind: 'refused', method: 'POST', target: '/v1/chat/completions' });
  });
});
