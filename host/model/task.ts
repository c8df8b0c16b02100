import { z } from 'zod';
import { JsonSchema, type Json } from './json';

/** DESIGN.md task statuses. `blocked` is not a status: it is a reason kept beside an untouched status. */
export const TASK_STATUSES = ['pending', 'running', 'waiting', 'sleeping', 'completing', 'terminal'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

export const TASK_OUTCOMES = ['ok', 'error', 'cancelled', 'interrupted'] as const;
export type TaskOutcome = (typeof TASK_OUTCOMES)[number];

export const JoinPolicySchema = z.enum(['allSettled', 'failFast']);
export type JoinPolicy = z.infer<typeof JoinPolicySchema>;

/** What a `waiting` task waits for, kept in the store as JSON. */
export const WaitSpecSchema = z.strictObject({
  join: JoinPolicySchema,
  children: z.array(z.string()),
  phase: z.string(),
  /** Set when the task waits for an outside signal (an operator's reconcile, an approval) rather than children. */
  signal: z.string().optional(),
});
export type WaitSpec = z.infer<typeof WaitSpecSchema>;

export const TaskErrorSchema = z.strictObject({
  code: z.string(),
  message: z.string(),
  details: JsonSchema.optional(),
});
export type TaskError = z.infer<typeof TaskErrorSchema>;

/** One task row as the kernel sees it. `version` increases with every transition (the CAS token). */
export interface Task {
  id: string;
  sessionId: string;
  runId: string | null;
  parentId: string | null;
  kind: string;
  kindVersion: number;
  status: TaskStatus;
  phase: string;
  checkpoint: Json;
  input: Json;
  /** How many times a phase of this task was entered. */
  attempts: number;
  /** How many times the host found it `running` at start-up. */
  restarts: number;
  wait: WaitSpec | null;
  /** For `sleeping`: when to wake, ms since the epoch. */
  wakeAt: number | null;
  outcome: TaskOutcome | null;
  result: Json;
  error: TaskError | null;
  cancelRequested: boolean;
  blockedReason: string | null;
  version: number;
  createdAt: number;
  updatedAt: number;
}
