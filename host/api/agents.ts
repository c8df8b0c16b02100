import { continueSession, submitAgentRun, type ContinueSession, type StartAgentRun } from '../agent';
import { hostRuntime, leaseTtlMs, type RuntimeParts } from './runtime';

/**
 * Submits an agent run (admitted, claimed by nobody) for a worker or a later drive; the same
 * request id returns the same run. The tools, secrets and model key are checked first.
 */
export function submitAgent(p: RuntimeParts, s: StartAgentRun) {
  const rt = hostRuntime(p, { claim: 'none', ttlMs: leaseTtlMs(undefined) });
  return submitAgentRun({ ...rt, toolNames: [...rt.agent.tools.keys()] }, s);
}

/**
 * Another run in an agent session (its next user message), submitted for a worker or a later
 * drive. The session exists and has had an owner, so the submission is a fenced write: this host
 * claims the session for it (refused while a live host drives it) and releases it at once.
 */
export async function submitChat(p: RuntimeParts, c: ContinueSession) {
  const rt = hostRuntime(p, { claim: 'own', ttlMs: leaseTtlMs(undefined) });
  try {
    return await continueSession({ ...rt, toolNames: [...rt.agent.tools.keys()] }, c);
  } finally {
    await rt.kernel.stop();
  }
}
