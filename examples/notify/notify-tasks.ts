import { z } from 'zod';
import { childResults, defineTask, extension, spawnEach, type Extension } from '../../host/agent/custom-tasks';
import type { Json } from '../../host/model';
import type { EmailClient } from './email-client';
import { recipientPlanId, recipientPlanType, RECIPIENT_PLAN, type RecipientPlan } from './recipient-plan';

export const SEND_NOTICES = 'send-notices';
export const SEND_NOTICE = 'send-notice';

const NoticeInput = z.strictObject({
  noticeId: z.string().regex(/^[a-z0-9-]+$/),
  subject: z.string(),
  body: z.string(),
  recipients: z.array(z.string().min(1)).min(1),
});
export type NoticeInput = z.infer<typeof NoticeInput>;

const EmailInput = z.strictObject({ planId: z.string(), index: z.number().int().min(0) });

/** What each email's task leaves: its receipt, and whether it was sent now, reused or confirmed by lookup. */
export interface EmailResult {
  operationId: string;
  to: string;
  messageId: string;
  how: 'sent' | 'receipt-reused' | 'confirmed-by-lookup';
}

/**
 * `send-notices` fixes the recipient plan (operation id per email) and creates one `send-notice`
 * task per email, in one commit with its wait; `summarize` reports the receipts. Each
 * `send-notice` sends one email under an effect record keyed by its operation id, with replay
 * `verify`: after a crash, a committed receipt is reused, an email caught in flight is looked up
 * by its operation id, and only one the service never saw is sent again.
 */
export function notifyExtension(email: EmailClient): Extension {
  const notices = defineTask({
    kind: SEND_NOTICES,
    input: NoticeInput,
    initialPhase: 'plan',
    phases: {
      plan: async (ctx) => {
        const n = ctx.value;
        const planId = recipientPlanId(ctx.task.runId!);
        const plan: RecipientPlan = { subject: n.subject, body: n.body, recipients: n.recipients.map((to, i) => ({ to, operationId: `${n.noticeId}-${i + 1}` })), receipts: {} };
        return spawnEach(SEND_NOTICE, n.recipients.map((_, index) => ({ planId, index })), {
          phase: 'summarize',
          writes: { documents: [{ documentId: planId, create: { type: RECIPIENT_PLAN, initial: plan as unknown as Json } }] },
        });
      },
      summarize: async (ctx) => {
        const plan = (await ctx.readDocument<RecipientPlan & Json>(recipientPlanId(ctx.task.runId!)))!.state as RecipientPlan;
        const children = await childResults(ctx);
        const failed = children.filter((c) => c.outcome !== 'ok');
        if (failed.length) return { type: 'fail', error: { code: 'notice_incomplete', message: `${failed.length} of ${children.length} emails not confirmed` } };
        return { type: 'complete', result: { sent: Object.keys(plan.receipts).length, emails: children.map((c) => c.result) } };
      },
    },
  });

  const one = defineTask({
    kind: SEND_NOTICE,
    input: EmailInput,
    initialPhase: 'send',
    // A conflicting receipt commit (another email's, on the same plan) re-runs the phase, which
    // then confirms its own send by lookup: retries are cheap and never send twice.
    maxRetries: 5,
    phases: {
      send: async (ctx) => {
        const { planId, index } = ctx.value;
        const plan = (await ctx.readDocument<RecipientPlan & Json>(planId))!.state as RecipientPlan;
        const r = plan.recipients[index]!;
        let how: EmailResult['how'] = 'sent';
        const out = await ctx.perform<{ messageId: string }>(
          {
            id: `email:${r.operationId}`,
            kind: 'email.send',
            intent: { operationId: r.operationId, to: r.to, subject: plan.subject },
            replay: 'verify',
            verify: async (_effect, signal) => {
              const found = await email.lookup(r.operationId, signal);
              if (!found.found) return { done: false };
              how = 'confirmed-by-lookup';
              return { done: true, receipt: { messageId: found.messageId } };
            },
          },
          async (signal) => email.send({ operationId: r.operationId, to: r.to, subject: plan.subject, body: plan.body }, signal),
        );
        if (out.status === 'uncertain') return { type: 'interrupt', reason: out.reason };
        if (out.reused && how === 'sent') how = 'receipt-reused';
        const result: EmailResult = { operationId: r.operationId, to: r.to, messageId: out.receipt.messageId, how };
        return { type: 'complete', result: result as unknown as Json, writes: { documents: [{ documentId: planId, op: { receipt: { operationId: r.operationId, messageId: out.receipt.messageId } } }] } };
      },
    },
  });

  return extension('notify', { tasks: [notices, one], documents: [recipientPlanType] });
}
