import { z } from 'zod';
import { childResults, defineTask, extension, spawnEach, type Extension } from '../../host/agent/custom-tasks';
import { isOperatorReceipt, type Decision } from '../../host/kernel';
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
  how: 'sent' | 'receipt-reused' | 'confirmed-by-lookup' | 'confirmed-by-reconciliation' | 'accepted-by-operator';
}

export const EMAIL_SEND = 'email.send';

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
        const planId = recipientPlanId(ctx.task.runId!);
        const plan = (await ctx.readDocument<RecipientPlan & Json>(planId))!.state as RecipientPlan;
        const children = await childResults(ctx);
        const emails: EmailResult[] = [];
        const uncertain: string[] = [];
        const failed: string[] = [];
        const documents: NonNullable<Decision['writes']>['documents'] = [];
        for (const [i, c] of children.entries()) {
          if (c.outcome === 'ok') {
            emails.push(c.result as unknown as EmailResult);
            continue;
          }
          // An email whose task could not tell (interrupted) is settled by its effect record:
          // reconciliation confirms it (the service's receipt or an operator's decision) or fails it.
          const r = plan.recipients[i]!;
          const e = await ctx.store.getEffect(`email:${r.operationId}`);
          if (e?.status === 'confirmed') {
            const settled = e.receipt;
            const operator = isOperatorReceipt(settled) ? settled : null;
            const messageId = operator ? `operator:${operator.by}` : (settled as { messageId: string }).messageId;
            emails.push({ operationId: r.operationId, to: r.to, messageId, how: operator ? 'accepted-by-operator' : 'confirmed-by-reconciliation' });
            if (!(r.operationId in plan.receipts)) {
              const receipt = operator ? { operationId: r.operationId, operator } : { operationId: r.operationId, messageId };
              documents.push({ documentId: planId, op: { receipt } as unknown as Json });
            }
          } else if (e && (e.status === 'unknown' || e.status === 'executing')) uncertain.push(r.operationId);
          else failed.push(r.operationId);
        }
        if (uncertain.length) {
          // The run cannot end while an email may or may not have been sent: it waits for reconciliation.
          // Only ways out that work for this run: each needs a host that runs these task kinds
          // (this program, or a berth that loads examples/notify/extension.ts).
          const reason =
            `email(s) ${uncertain.join(', ')} may or may not have been sent. Settle it with a host that loads this extension ` +
            '(NOTIFY_SERVICE_URL=… berth --extension examples/notify/extension.ts reconcile RUN): --verify asks the service, ' +
            '--accept or --reject-effect says whether it was sent, --fail ends the run (run-notify --reconcile RUN takes --verify or --accept)';
          return { type: 'await', signal: 'reconcile', phase: 'summarize', run: { to: 'needs_reconciliation', reason } };
        }
        if (failed.length) return { type: 'fail', error: { code: 'notice_incomplete', message: `${failed.length} of ${children.length} emails not sent: ${failed.join(', ')}` }, writes: { documents } };
        return { type: 'complete', result: { sent: emails.length, emails } as unknown as Json, writes: { documents } };
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
            kind: EMAIL_SEND,
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

  // What `berth reconcile --verify` (or `run-notify --reconcile RUN --verify`) asks about an email left unknown.
  const verifyEmail = async (effect: { intent: Json }, signal: AbortSignal) => {
    const found = await email.lookup((effect.intent as { operationId: string }).operationId, signal);
    return found.found ? { done: true as const, receipt: { messageId: found.messageId } } : { done: false as const };
  };
  return extension('notify', { tasks: [notices, one], documents: [recipientPlanType], verifiers: { [EMAIL_SEND]: verifyEmail } });
}
