/**
 * The notify task kinds and the `email.send` verifier, for a `berth` CLI or `berth serve` that
 * must settle a notice run itself:
 *
 *   NOTIFY_SERVICE_URL=http://… berth --extension examples/notify/extension.ts reconcile RUN --verify
 *
 * (or `BERTH_EXTENSIONS=examples/notify/extension.ts`). The service is the one the program sends
 * through; the verifier looks each uncertain email up by its operation id and sends nothing.
 */
import { httpEmailClient } from './email-client';
import { notifyExtension } from './notify-tasks';

export default function notify() {
  const url = process.env.NOTIFY_SERVICE_URL;
  if (!url) throw new Error('NOTIFY_SERVICE_URL is not set: the notify extension needs the email service it sends through');
  return notifyExtension(httpEmailClient(url));
}
