/** A secret value as the scrubber needs it: the name shown in its place and the value itself. */
export interface ScrubSecret {
  name: string;
  value: string;
}

/**
 * Shortest encoded core worth replacing: a shorter run of base64 or hex characters appears by
 * chance in ordinary output, and replacing it would garble that output without hiding anything.
 */
const MIN_CORE = 8;

/**
 * The base64 characters that depend only on `bytes` when they sit `offset` (0–2) bytes after a
 * 3-byte boundary of a longer encoded stream, whatever comes before or after them: drop the
 * characters that share bits with the bytes around, keep the rest.
 */
export function base64Core(bytes: Buffer, offset: 0 | 1 | 2, alphabet: 'base64' | 'base64url' = 'base64'): string {
  const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString(alphabet);
  const from = Math.ceil((8 * offset) / 6);
  const to = Math.floor((8 * (offset + bytes.length)) / 6);
  return to > from ? encoded.slice(from, to) : '';
}

/**
 * Every spelling of a value that must not survive in output: the value itself; its base64 forms,
 * whole (padded, unpadded, with a trailing newline as `echo $T | base64` makes) and as the core
 * that stays the same at any of the three byte offsets inside a longer encoded text, in the
 * standard and the url-safe alphabet; and its hex, lower and upper case. Longest first, so a
 * shorter form never leaves part of a longer one behind. Out of reach (see host/secrets/README.md):
 * line-wrapped base64 of long values, hex with separators, mixed case, any other transform.
 */
export function secretForms(value: string): string[] {
  if (value === '') return [];
  const bytes = Buffer.from(value, 'utf8');
  const b64 = bytes.toString('base64');
  const nl = Buffer.from(`${value}\n`, 'utf8').toString('base64');
  const forms = new Set([value, b64, b64.replace(/=+$/, ''), bytes.toString('base64url'), nl, nl.replace(/=+$/, '')]);
  for (const f of encodedCores(bytes)) forms.add(f);
  return [...forms].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);
}

/**
 * The encodings of `bytes` that survive inside any longer encoded text: hex in both cases and the
 * base64 core at each of the three byte offsets, in both alphabets (each at least MIN_CORE long).
 */
export function encodedCores(bytes: Buffer): string[] {
  const out: string[] = [];
  const hex = bytes.toString('hex');
  if (hex.length >= MIN_CORE) out.push(hex, hex.toUpperCase());
  for (const offset of [0, 1, 2] as const) {
    for (const alphabet of ['base64', 'base64url'] as const) {
      const core = base64Core(bytes, offset, alphabet);
      if (core.length >= MIN_CORE) out.push(core);
    }
  }
  return out;
}

/** The marker that replaces a secret in output. */
export const redactedMarker = (name: string) => `[redacted:${name}]`;

interface Form {
  text: string;
  name: string;
}

function formsOf(secrets: readonly ScrubSecret[]): Form[] {
  return secrets.flatMap((s) => secretForms(s.value).map((text) => ({ text, name: s.name }))).sort((a, b) => b.text.length - a.text.length);
}

function replaceAll(text: string, forms: readonly Form[]): string {
  let out = text;
  for (const f of forms) if (out.includes(f.text)) out = out.split(f.text).join(redactedMarker(f.name));
  return out;
}

/** `text` with every secret value and its base64 forms replaced by `[redacted:NAME]`. */
export function scrub(text: string, secrets: readonly ScrubSecret[]): string {
  if (secrets.length === 0 || text === '') return text;
  return replaceAll(text, formsOf(secrets));
}

/** A JSON-like value with every string in it scrubbed (keys included). */
export function scrubDeep<T>(value: T, secrets: readonly ScrubSecret[]): T {
  if (secrets.length === 0) return value;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrub(v, secrets);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrub(k, secrets), walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/**
 * Scrubs a stream that arrives in chunks. A secret can be split across two chunks, so the last
 * (longest form − 1) characters are held back until the next chunk or {@link StreamScrubber.end}
 * shows whether they begin a secret.
 */
export class StreamScrubber {
  private readonly forms: Form[];
  private readonly hold: number;
  private carry = '';

  constructor(secrets: readonly ScrubSecret[]) {
    this.forms = formsOf(secrets);
    this.hold = Math.max(0, ...this.forms.map((f) => f.text.length - 1));
  }

  /** The part of the stream so far that is safe to show. */
  push(chunk: string): string {
    if (this.forms.length === 0) return chunk;
    const text = this.carry + chunk;
    let cut = Math.max(0, text.length - this.hold);
    // Never cut inside a whole occurrence: move the cut past any match that straddles it.
    for (const f of this.forms) {
      let i = text.indexOf(f.text);
      while (i !== -1) {
        if (i < cut && i + f.text.length > cut) cut = i + f.text.length;
        i = text.indexOf(f.text, i + 1);
      }
    }
    this.carry = text.slice(cut);
    return replaceAll(text.slice(0, cut), this.forms);
  }

  /** Whatever was held back, scrubbed. */
  end(): string {
    const rest = replaceAll(this.carry, this.forms);
    this.carry = '';
    return rest;
  }
}
