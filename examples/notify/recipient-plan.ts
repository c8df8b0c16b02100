import { z } from 'zod';
import { defineDocument } from '../../host/agent/custom-tasks';
import { OperatorReceipt } from '../../host/kernel';

const Recipient = z.strictObject({ to: z.string().min(1), operationId: z.string().min(1) });

/** A service receipt (its message id), or an operator's decision when the service could not say. */
export const EmailReceipt = z.union([z.string(), OperatorReceipt]);
export type EmailReceipt = z.infer<typeof EmailReceipt>;

/**
 * The confirmed plan of a notice: who gets it, under which operation id each email is sent, and
 * the receipts confirmed so far. Receipts are added by the same commit that completes the email's
 * task, so "receipt recorded" and "email done" can never disagree.
 */
export const RecipientPlan = z.strictObject({
  subject: z.string(),
  body: z.string(),
  recipients: z.array(Recipient),
  receipts: z.record(z.string(), EmailReceipt),
});
export type RecipientPlan = z.infer<typeof RecipientPlan>;

const ReceiptOp = z.union([
  z.strictObject({ receipt: z.strictObject({ operationId: z.string(), messageId: z.string() }) }),
  z.strictObject({ receipt: z.strictObject({ operationId: z.string(), operator: OperatorReceipt }) }),
]);

export const RECIPIENT_PLAN = 'notify.recipient-plan';

export const recipientPlanType = defineDocument<RecipientPlan, z.infer<typeof ReceiptOp>>({
  type: RECIPIENT_PLAN,
  state: RecipientPlan,
  op: ReceiptOp,
  initial: { subject: '', body: '', recipients: [], receipts: {} },
  apply: (s, op) => ({ ...s, receipts: { ...s.receipts, [op.receipt.operationId]: 'messageId' in op.receipt ? op.receipt.messageId : op.receipt.operator } }),
});

export const recipientPlanId = (runId: string) => `${runId}:recipient-plan`;
