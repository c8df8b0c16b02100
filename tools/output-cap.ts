/**
 * Keeps the head and tail of a long text with a marker saying how much was dropped, so both the
 * start of a listing and the end of a failing test run stay visible.
 */
export function capText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  const keep = Math.max(0, maxChars - 64);
  const head = Math.ceil(keep / 2);
  const tail = keep - head;
  const dropped = text.length - head - tail;
  return { text: `${text.slice(0, head)}\n[... ${dropped} characters elided ...]\n${text.slice(text.length - tail)}`, truncated: true };
}
