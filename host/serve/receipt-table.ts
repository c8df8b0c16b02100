import { html, jsonText, type SafeHtml } from './html';

const scalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);
const MAX_TEXT = 2000;

/**
 * A receipt (or any stored JSON object) as a two-column table: each field with its value, long
 * text in a <pre> cut to its end, nested objects as their own small table, arrays as JSON. Every
 * value goes through html`` (escaped).
 */
export function receiptTable(v: unknown, depth = 0): SafeHtml {
  if (v === null || v === undefined) return html`—`;
  if (scalar(v)) {
    const text = String(v);
    if (typeof v === 'number' && !Number.isInteger(v)) return html`${Number(v.toFixed(3))}`;
    return text.includes('\n') || text.length > 120 ? html`<pre>${text.length > MAX_TEXT ? `[... ${text.length - MAX_TEXT} characters before ...]\n${text.slice(-MAX_TEXT)}` : text}</pre>` : html`${text}`;
  }
  if (Array.isArray(v) || depth > 2) return html`<pre>${jsonText(v)}</pre>`;
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return html`<span class="muted">(empty)</span>`;
  return html`<table class="receipt"><tbody>${entries.map(([k, x]) => html`<tr><th>${k}</th><td>${receiptTable(x, depth + 1)}</td></tr>`)}</tbody></table>`;
}
