/**
 * Agent runs: a user message starts a loop of model generation tasks and tool tasks over the
 * kernel, in the session's sandbox, with approvals and durable recovery at every step.
 */
export { registerAgent, type RegisterAgentOptions } from './register';
export { submitAgentRun, continueSession, type StartAgentRun, type ContinueSession } from './submit-agent';
export { decideApproval, listApprovals, type ApprovalView, type DecideApproval } from './approvals';
export { approvalDigest, approvalId } from './approval-digest';
export { buildContext, recordedCut, type ContextOptions, type Cut } from './context';
export { planContext, estimateTokens, type BudgetPlan, type BudgetOptions } from './context-budget';
export { checkToolCall, type CheckedCall } from './tool-call-check';
export { AgentSettingsSchema, DEFAULT_SYSTEM_PROMPT, type AgentSettings, type AgentSettingsInput, type AgentRunInput, type ToolCallInput } from './agent-input';
export { ENTRY, type ModelEntry, type ToolResultEntry, type ToolResultStatus, type InterruptionEntry, type UserEntry, type ApprovalRequestedEntry, type ApprovalDecidedEntry, type CompactionEntry } from './entries';
export { AGENT_KIND } from './root-task';
export { GENERATE_KIND, type GenerationResult } from './generation-task';
export { TOOL_KIND, sessionSandboxDocId, type SandboxState } from './agent-sandbox';
export { TIMER_KIND } from './approval-timer';
export type { AgentLiveEvent } from './agent-deps';
export type { ToolTaskResult } from './tool-result';
export * from './model';
