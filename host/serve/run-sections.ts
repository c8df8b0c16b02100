import { forkIndexOf } from '../fork';
import { ENTRY, type ApprovalDecidedEntry, type ApprovalRequestedEntry, type ModelEntry, type ToolResultEntry, type UserEntry } from '../agent';
import type { Effect, Entry } from '../model';
import { html, jsonText, nameText, type SafeHtml } from './html';
import { duration, postForm, stateBadge, when } from './layout';
import type { RunView } from './run-view';
import { receiptTable } from './receipt-table';

/** One section per concept; `id` is the anchor and the test hook. */
export const section = (id: string, title: string, body: SafeHtml | string) => html`<section id="${id}"><h2>${title}</h2>${body}</section>`;
const none = (what: string) => html`<p class="muted">${what}</p>`;

export function timelineSection(v: RunView): SafeHtml {
  return section('timeline', 'State timeline', html`<table><thead><tr><th>#</th><th>at</th><th>from → to</th><th>actor</th><th>reason</th></tr></thead><tbody>${v.transitions.map(
    (t) => html`<tr><td>${t.n}</td><td>${when(t.at)}</td><td>${t.from ?? '—'} → ${stateBadge(t.to)}</td><td class="actor">${t.actor}</td><td>${t.reason}</td></tr>`,
  )}</tbody></table>`);
}

export function tasksSection(v: RunView): SafeHtml {
  const byParent = new Map<string | null, typeof v.tasks>();
  for (const t of v.tasks) byParent.set(t.parentId, [...(byParent.get(t.parentId) ?? []), t]);
  const walk = (parent: string | null): SafeHtml =>
    html`<ul>${(byParent.get(parent) ?? []).map(
      (t) => html`<li><code>${t.kind}</code> ${t.id} — ${t.status === 'terminal' ? t.outcome : `${t.status} in ${t.phase}`}${t.error ? html` <span class="muted">(${t.error.code}: ${t.error.message})</span>` : ''}${t.blockedReason ? html` <span class="muted">blocked: ${t.blockedReason}</span>` : ''}${walk(t.id)}</li>`,
    )}</ul>`;
  return section('tasks', 'Task tree', v.tasks.length ? walk(null) : none('no tasks'));
}

const uncertain = (e: Effect) => e.status === 'unknown' || e.status === 'executing';

export function effectsSection(v: RunView): SafeHtml {
  return section('effects', 'Effects', v.effects.length === 0 ? none('no effects') : html`<table><thead><tr><th>key</th><th>kind</th><th>replay</th><th>status</th><th>attempts</th><th>receipt</th></tr></thead><tbody>${v.effects.map(
    (e) => html`<tr${uncertain(e) ? html` class="attention"` : ''}><td><code>${nameText(e.id)}</code></td><td>${e.kind}</td><td>${e.replay}</td><td>${e.status}</td><td>${e.attempts}</td><td>${e.receipt === null ? '—' : receiptTable(e.receipt)}</td></tr>`,
  )}</tbody></table>`);
}

export function approvalsSection(v: RunView, csrf: string): SafeHtml {
  if (v.run.kind !== 'agent') return html``;
  return section('approvals', 'Approvals', v.approvals.length === 0 ? none('no tool call asked for approval') : html`<table><thead><tr><th>tool call</th><th>arguments</th><th>scope digest</th><th>state</th><th></th></tr></thead><tbody>${v.approvals.map(
    (a) => html`<tr data-approval="${a.approvalId}"><td>${nameText(a.tool)} <code>${a.toolCallId}</code></td><td><pre>${jsonText(a.arguments)}</pre></td><td><code class="digest">${a.digest}</code></td><td class="approval-state">${a.state}${a.by ? html` by <span class="actor">${a.by}</span>` : ''}</td><td>${a.state === 'pending'
      ? html`${postForm(`/runs/${v.run.id}/approve`, csrf, 'approve', { id: a.approvalId, digest: a.digest })} ${postForm(`/runs/${v.run.id}/deny`, csrf, 'deny', { id: a.approvalId })}<br><span class="muted">approves exactly digest ${a.digest.slice(0, 19)}…; expires ${when(a.expiresAt)}</span>`
      : ''}</td></tr>`,
  )}</tbody></table>`);
}

export function snapshotsSection(v: RunView, csrf: string): SafeHtml {
  const reconcilable = v.run.state === 'needs_reconciliation';
  const open = v.effects.filter(uncertain).length > 0;
  const answer = open ? html`<select name="answer"><option value="accept">the uncertain effect happened (--accept)</option><option value="reject-effect">it did not happen (--reject-effect)</option></select> ` : undefined;
  return section('snapshots', 'Snapshots', v.snapshots.length === 0 ? none('no snapshots') : html`<table><thead><tr><th>snapshot</th><th>checkpoint</th><th>size</th><th>digest</th><th>image</th><th>pushed</th><th></th></tr></thead><tbody>${v.snapshots.map(
    (s) => html`<tr data-snapshot="${s.id}"><td><code>${s.id}</code></td><td>${nameText(s.checkpoint)}</td><td>${(s.sizeBytes / 1e6).toFixed(1)} MB</td><td><code>${s.workspaceDigest.slice(0, 23)}</code></td><td><code>${s.imageId.slice(0, 19)}</code>${s.prunedAt ? ' (pruned)' : ''}</td><td class="pushed">${s.registryRef && s.pushedAt !== null ? html`<code>${s.registryRef}</code> ${when(s.pushedAt)}` : html`<span class="muted">local only</span>`}</td><td>${reconcilable && !s.prunedAt ? postForm(`/runs/${v.run.id}/reconcile`, csrf, 'restore this snapshot', { restore: s.id }, answer) : ''}${forkableHere(v, s) ? postForm(`/runs/${v.run.id}/fork`, csrf, 'fork from here', { at: s.id }) : ''}</td></tr>`,
  )}</tbody></table>`);
}

/** A plan's committed checkpoint still kept: `berth fork RUN --at SNAPSHOT` can start from it (the command checks the rest). */
const forkableHere = (v: RunView, s: RunView['snapshots'][number]) => v.run.kind === 'plan' && s.prunedAt === null && forkIndexOf(s.checkpoint) !== null;

export function actionsSection(v: RunView, csrf: string): SafeHtml {
  const id = v.run.id;
  const cancellable = ['admitted', 'running', 'retry_wait', 'waiting_for_input', 'awaiting_approval'].includes(v.run.state);
  const parts: SafeHtml[] = [];
  if (cancellable) parts.push(postForm(`/runs/${id}/cancel`, csrf, 'cancel run'));
  if (v.run.state === 'completed') {
    // Acceptance is apart from completion: the operator judges the outcome (berth accept / reject).
    parts.push(postForm(`/runs/${id}/accept`, csrf, 'Accept'));
    parts.push(postForm(`/runs/${id}/reject`, csrf, 'Reject', {}, html`<input name="reason" required placeholder="why the outcome is not acceptable"> `));
  }
  if (v.run.state === 'needs_reconciliation') parts.push(...reconcileChoices(v, csrf));
  return section('actions', 'Actions', parts.length ? html`${parts.map((p) => html`${p} `)}` : none(`nothing to decide while ${v.run.state}`));
}

/**
 * The choices of `berth reconcile` (accept, reject, verify, restore, fail), each one form. Failing a
 * run with uncertain effects also settles them, so that form asks whether they happened.
 */
function reconcileChoices(v: RunView, csrf: string): SafeHtml[] {
  const id = v.run.id;
  const open = v.effects.filter(uncertain).length;
  const restore = v.snapshots.some((s) => !s.prunedAt) ? html`<span class="muted">or restore a snapshot below</span>` : html``;
  if (!open) return [postForm(`/runs/${id}/reconcile`, csrf, 'accept: continue in the current sandbox', { answer: 'accept' }), postForm(`/runs/${id}/reconcile`, csrf, 'fail the run', { fail: '1' }), restore];
  const answer = html`<select name="answer" required><option value="" selected disabled>did the uncertain effects happen?</option><option value="accept">they happened</option><option value="reject-effect">they did not happen</option><option value="unknown">not known: leave them uncertain (never run again)</option></select> `;
  return [
    postForm(`/runs/${id}/reconcile`, csrf, 'accept: the uncertain effects happened, continue here', { answer: 'accept' }),
    postForm(`/runs/${id}/reconcile`, csrf, 'reject: they did not happen, continue', { answer: 'reject-effect' }),
    postForm(`/runs/${id}/reconcile`, csrf, 'verify: ask the service again', { verify: '1' }),
    postForm(`/runs/${id}/reconcile`, csrf, 'fail the run', { fail: '1' }, answer),
    restore,
  ];
}

export function leasesSection(v: RunView): SafeHtml {
  return section('leases', 'Leases and sandbox', v.leases.length === 0 ? none('no sandbox leased') : html`<table><thead><tr><th>lease</th><th>container</th><th>image</th><th>environment</th><th>state</th></tr></thead><tbody>${v.leases.map(
    (l) => html`<tr><td><code>${l.id}</code>${l.current ? ' (current)' : ''}${l.keptBySession ? ' (kept by the session)' : ''}</td><td><code>${l.containerId.slice(0, 12) || '(none yet)'}</code></td><td><code>${l.imageDigest.slice(0, 19)}</code></td><td><code>${l.envFingerprint.slice(0, 19)}</code></td><td>${l.releasedAt ? `released ${when(l.releasedAt)}` : `expires ${when(l.expiresAt)}`}</td></tr>`,
  )}</tbody></table>${limitsOf(v)}`);
}

function limitsOf(v: RunView): SafeHtml {
  const root = v.tasks.find((t) => t.id === v.run.rootTaskId);
  const env = root?.input && typeof root.input === 'object' && !Array.isArray(root.input) ? (root.input as Record<string, unknown>).environment : undefined;
  const resources = env && typeof env === 'object' ? (env as Record<string, unknown>).resources : undefined;
  return resources ? html`<p>limits:</p><pre>${jsonText(resources)}</pre>` : html``;
}

export function egressSection(v: RunView): SafeHtml {
  const e = v.egress;
  return section('egress', 'Egress', html`<p>${e.allowed} allowed, ${e.denied} denied</p>${e.attempts?.length ? html`<table><tbody>${e.attempts.slice(-200).map(
    (a) => html`<tr><td>${when(a.at)}</td><td>${a.decision}</td><td>${a.method} ${a.target}</td><td>${a.reason}</td></tr>`,
  )}</tbody></table>` : ''}${e.dropped.length ? html`<p>dropped by the sandbox network rules:</p><table><tbody>${e.dropped.map((x) => html`<tr><td>${x.proto}</td><td>${x.target}</td><td>x${x.count}</td></tr>`)}</tbody></table>` : ''}`);
}

/** The run's record, newest first, one page at a time: the conversation for agents, step output for plans. */
export function entriesSection(v: RunView): SafeHtml {
  // A tool call's effect id ends with its tool call id (`run:task:call`); a call that never ran has none.
  const replayOf = new Map(v.effects.map((e) => [e.id.slice(e.id.lastIndexOf(':') + 1), e.replay]));
  const one = (e: Entry): SafeHtml => {
    const head = html`<span class="muted">#${e.seq} ${when(e.at)} ${e.kind}</span>`;
    switch (e.kind) {
      case ENTRY.user:
        return html`<div class="entry user">${head}<pre>${(e.body as unknown as UserEntry).text}</pre></div>`;
      case ENTRY.model: {
        const m = e.body as unknown as ModelEntry;
        return html`<div class="entry model">${head} turn ${m.turn} · ${m.model}${m.usage ? ` · ${m.usage.totalTokens} tokens` : ''}${m.content ? html`<pre class="model-text">${m.content}</pre>` : ''}${m.toolCalls.map(
          (c) => html`<div>tool call <strong>${nameText(c.name)}</strong> <code>${c.id}</code> replay ${replayOf.get(c.id) ?? '— (never ran)'}<pre>${c.arguments}</pre></div>`,
        )}</div>`;
      }
      case ENTRY.toolResult: {
        const r = e.body as unknown as ToolResultEntry;
        return html`<div class="entry tool-result">${head} ${nameText(r.name)} <code>${r.toolCallId}</code> ${r.status}<pre>${r.content}</pre></div>`;
      }
      case ENTRY.approvalRequested: {
        const r = e.body as unknown as ApprovalRequestedEntry;
        return html`<div class="entry">${head} ${nameText(r.tool)} <code>${r.toolCallId}</code> digest <code>${r.digest}</code></div>`;
      }
      case ENTRY.approvalDecided: {
        const r = e.body as unknown as ApprovalDecidedEntry;
        return html`<div class="entry">${head} ${r.decision} by ${r.by}</div>`;
      }
      default:
        return html`<div class="entry">${head}${receiptTable(e.body)}</div>`;
    }
  };
  return section('record', v.run.kind === 'agent' ? 'Conversation and record (newest first)' : 'Record (newest first)', html`${v.entries.length ? v.entries.map(one) : none('no entries')}${v.olderBefore !== null ? html`<p><a id="older" href="/runs/${v.run.id}?before=${v.olderBefore}">older entries</a></p>` : ''}`);
}
