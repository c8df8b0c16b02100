import { z } from 'zod';
import { defineDocument } from '../../host/agent/custom-tasks';

const Recipient = z.strictObject({ to: z.string().min(1), operationId: z.string().min(1) });

/**
 * The confirmed plan of a notice: who gets it, under which operation id each email is sent, and
 * the receipts confirmed so far. Receipts are added by the same commit that completes the email's
 * task, so "receipt recorded" and "email done" can never disagree.
 */
export const RecipientPlan = z.strictObject({
  subject: z.string(),
  body: z.string(),
  recipients: z.array(Recipient),
  receipts: z.record(z.string(), z.string()),
});
export type RecipientPlan = z.infer<typeof RecipientPlan>;

const ReceiptOp = z.strictObject({ receipt: z.strictObject({ operationId: z.string(), messageId: z.string() }) });

export const RECIPIENT_PLAN = 'notify.recipient-plan';

export const recipientPlanType = defineDocument<RecipientPlan, z.infer<typeof ReceiptOp>>({
  type: RECIPIENT_PLAN,
  state: RecipientPlan,
  op: ReceiptOp,
  initial: { subject: '', body: '', recipients: [], receipts: {} },
  apply: (s, op) => ({ ...s, receipts: { ...s.receipts, [op.receipt.operationId]: op.receipt.messageId } }),
});

export const recipientPlanId = (runId: string) => `${runId}:recipient-plan`;
