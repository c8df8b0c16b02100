import { createHash } from 'node:crypto';

/** `sha256:` + hex of the bytes, the form every file digest in intents and receipts takes. */
export function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}
