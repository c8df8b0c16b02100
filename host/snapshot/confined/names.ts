/**
 * File names are bytes; manifests are JSON strings. A name is kept as its UTF-8 text when it is
 * valid UTF-8, and every byte of an invalid sequence becomes the lone surrogate U+DC00+byte (the
 * "surrogateescape" of PEP 383). Valid UTF-8 never decodes to a lone surrogate, so the mapping is
 * one to one, existing (UTF-8) names keep their exact strings, and JSON carries the escapes as
 * `\udcXX`. Hashing and writing must go back to bytes through {@link nameBytes}: Node's own UTF-8
 * encoder turns every lone surrogate into U+FFFD, which would make `a\377` and `a\376` one name.
 */

/** The string a name's bytes are kept as. */
export function nameString(b: Buffer): string {
  const s = b.toString('utf8');
  // Fast path: nothing was replaced, or a real U+FFFD that round-trips.
  if (!s.includes('\uFFFD') || Buffer.from(s, 'utf8').equals(b)) return s;
  let out = '';
  let i = 0;
  while (i < b.length) {
    const n = validSequence(b, i);
    if (n === 0) {
      out += String.fromCharCode(0xdc00 + b[i]!);
      i++;
    } else {
      out += b.toString('utf8', i, i + n);
      i += n;
    }
  }
  return out;
}

/** The bytes a kept name stands for. */
export function nameBytes(s: string): Buffer {
  if (!hasEscapedBytes(s)) return Buffer.from(s, 'utf8');
  const parts: Buffer[] = [];
  let run = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc80 && c <= 0xdcff && !(i > 0 && isHigh(s.charCodeAt(i - 1)))) {
      if (run) parts.push(Buffer.from(run, 'utf8'));
      run = '';
      parts.push(Buffer.of(c - 0xdc00));
    } else run += s[i];
  }
  if (run) parts.push(Buffer.from(run, 'utf8'));
  return Buffer.concat(parts);
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;

/** Whether the kept name holds bytes that are not UTF-8 (a tar header written as text cannot carry it). */
export function hasEscapedBytes(s: string): boolean {
  return /[\udc80-\udcff]/.test(s) && /(?<![\ud800-\udbff])[\udc80-\udcff]/.test(s);
}

/** Length of the valid UTF-8 sequence at `i`, 0 when the byte there starts none. */
function validSequence(b: Buffer, i: number): number {
  const c = b[i]!;
  if (c < 0x80) return 1;
  const cont = (k: number) => i + k < b.length && (b[i + k]! & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const c1 = b[i + 1]!;
    // Overlong forms and the surrogate range are not UTF-8.
    if ((c === 0xe0 && c1 < 0xa0) || (c === 0xed && c1 > 0x9f)) return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const c1 = b[i + 1]!;
    if ((c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return 0;
    return 4;
  }
  return 0;
}
