/** A secret value as the scrubber needs it: the name shown in its place and the value itself. */
export interface ScrubSecret {
  name: string;
  value: string;
}

/**
 * Every spelling of a value that must not survive in output: the value itself and its base64
 * forms (padded, unpadded, url-safe), because a command can as easily print `base64 <<<$TOKEN`.
 * Longest first, so a shorter form never leaves part of a longer one behind.
 */
export function secretForms(value: string): string[] {
  if (value === '') return [];
  const b64 = Buffer.from(value, 'utf8').toString('base64');
  const url = Buffer.from(value, 'utf8').toString('base64url');
  const forms = new Set([value, b64, b64.replace(/=+$/, ''), url]);
  // A value followed by a newline (`echo $TOKEN | base64`) encodes differently; cover that too.
  const nl = Buffer.from(`${value}\n`, 'utf8').toString('base64');
  forms.add(nl);
  forms.add(nl.replace(/=+$/, ''));
  return [...forms].filter((f) => f.length > 0).sort((a, b) => b.length - a.length);
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
