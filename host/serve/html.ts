/**
 * HTML built only through {@link html}: every interpolated value is escaped unless it is already
 * {@link SafeHtml} made by this module, so a step's output or a model's text containing `<script>`
 * renders as text. There is no other way to put a string into a page.
 */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Text made safe for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

/**
 * What shows nothing or changes how the text after it is shown: controls (C0, DEL, C1), format
 * characters (bidi embeddings, overrides, isolates and marks, zero-width ones, the BOM, soft hyphen)
 * the line and paragraph separators, and a lone surrogate.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;

const escapeOf = (ch: string) => {
  const cp = ch.codePointAt(0)!;
  return cp > 0xffff ? `\\u{${cp.toString(16).toUpperCase()}}` : `\\u${cp.toString(16).toUpperCase().padStart(4, '0')}`;
};

/**
 * A name (a run's, a file's, a step's or a tool's, an artifact path, a tag) as escaped text with
 * every invisible or reordering character shown as its `\uXXXX` escape, marked: shown as they
 * are, `report\u202Efdp.exe` read "reportexe.pdf" and `a\u200Bb` passed for `ab`. Output and
 * messages keep their characters; a name is what an operator tells things apart by.
 */
export function nameText(name: string): SafeHtml {
  return new SafeHtml(escapeHtml(name).replace(INVISIBLE, (ch) => `<span class="ctl">${escapeOf(ch)}</span>`));
}

type Part = SafeHtml | string | number | boolean | null | undefined | Part[];

const render = (v: Part): string => {
  if (v === null || v === undefined || v === false || v === true) return '';
  if (v instanceof SafeHtml) return v.value;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
};

/** Tagged template: the literal parts are trusted markup, every `${value}` is escaped (arrays joined). */
export function html(strings: TemplateStringsArray, ...values: Part[]): SafeHtml {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new SafeHtml(out);
}

/** Pretty JSON as escaped text (for receipts, arguments, limits). */
export const jsonText = (v: unknown): string => JSON.stringify(v, null, 2) ?? 'null';
