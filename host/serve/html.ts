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
