import { describe, expect, it } from 'vitest';
import { AnswerReader, type AnswerHead } from '../../host/gateway/http1-answer';

/** Feeds `text` in pieces of `step` bytes; returns what the sink saw. */
function read(text: string, step = text.length, bodiless = false) {
  const seen: { head?: AnswerHead; body: string; ended: boolean; reader?: AnswerReader } = { body: '', ended: false };
  const r = new AnswerReader({ head: (h) => (seen.head = h), data: (d) => (seen.body += d.toString('latin1')), end: () => (seen.ended = true) }, bodiless);
  seen.reader = r;
  const buf = Buffer.from(text, 'latin1');
  for (let i = 0; i < buf.length; i += step) r.feed(buf.subarray(i, i + step));
  return seen as typeof seen & { reader: AnswerReader };
}

describe("reading a provider's HTTP/1.1 answer by hand", () => {
  it('reads a Content-Length answer, whole or a byte at a time, and keeps the connection', () => {
    const text = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}';
    for (const step of [text.length, 1, 7]) {
      const r = read(text, step);
      expect(r.head).toMatchObject({ status: 200, length: 11, reusable: true, headers: [['content-type', 'application/json'], ['content-length', '11']] });
      expect([r.body, r.ended, r.reader.keep]).toEqual(['{"ok":true}', true, true]);
    }
  });

  it('decodes a chunked answer with chunk extensions and trailers, a byte at a time', () => {
    const text = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n';
    for (const step of [text.length, 1, 3]) {
      const r = read(text, step);
      expect([r.head?.length, r.body, r.ended, r.reader.keep]).toEqual([null, 'hello world', true, true]);
    }
  });

  it('skips interim answers, reads an answer that has no body, and does not keep a connection the provider closes', () => {
    expect(read('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')).toMatchObject({ head: { status: 200 }, body: 'ok', ended: true });
    expect(read('HTTP/1.1 204 No Content\r\n\r\n')).toMatchObject({ head: { status: 204, length: 0 }, body: '', ended: true });
    const closing = read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    expect([closing.ended, closing.reader.keep]).toEqual([true, false]);
  });

  it('reads a body without framing until the connection closes, and never keeps that connection', () => {
    const r = read('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end');
    expect([r.head?.reusable, r.ended]).toEqual([false, false]);
    r.reader.closed();
    expect([r.body, r.ended]).toEqual(['until the end', true]);
  });

  it('does not keep a connection that carried bytes past the end of the answer', () => {
    const r = read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
    expect([r.body, r.ended, r.reader.keep]).toEqual(['ok', true, false]);
  });

  it('fails an answer framed two ways or framed wrongly, and one cut before its end', () => {
    expect(() => read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n')).toThrow('Transfer-Encoding with Content-Length');
    expect(() => read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok')).toThrow('invalid or repeated Content-Length');
    expect(() => read('HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n')).toThrow('invalid or repeated Content-Length');
    expect(() => read('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n')).toThrow('unsupported Transfer-Encoding');
    expect(() => read('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')).toThrow('invalid chunk size');
    expect(() => read('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX')).toThrow('chunk not followed by CRLF');
    expect(() => read('HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n')).toThrow('invalid answer header');
    expect(() => read('HTTP/1.1 200 OK\r\nX-A : a\r\n\r\n')).toThrow('invalid answer header');
    expect(() => read('HTTP/2 200\r\n\r\n')).toThrow('invalid status line');
    const cut = read('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort');
    expect(() => cut.reader.closed()).toThrow('before the end of its answer');
  });
});
