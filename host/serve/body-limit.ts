import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { refusal } from './api-errors';

/**
 * Largest request body berth serve reads. Its POSTs carry a form's few fields or a small JSON
 * object (a plan is named by its path, never sent), and every body used to be read whole into
 * memory first: one 300 MiB POST grew the server by 1.9 GB and ended in a 500.
 */
export const MAX_BODY_BYTES = 1024 * 1024;

/** 413 as soon as a declared length or the bytes read pass the limit; the API's answer is its typed error. */
export function limitBodies(): MiddlewareHandler {
  return bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => {
      const message = `request body larger than ${MAX_BODY_BYTES} bytes`;
      return refusal(c, 413, 'request_too_large', message);
    },
  });
}
