import { html, nameText, type SafeHtml } from './html';
import { stateBadge, when } from './layout';
import {
  actionsSection, approvalsSection, effectsSection, egressSection, entriesSection, leasesSection, snapshotsSection, tasksSection, timelineSection,
} from './run-sections';
import { acceptanceSection, artifactsSection, costSection, lineageSection } from './run-outcome';
import type { RunView } from './run-view';
import { stepsSection, toolOutputSection } from './run-steps';
import { diffForm } from './snapshot-diff';

/** The live part of a run page: every section, in the order an operator reads them. */
export function runFragment(v: RunView, csrf: string): SafeHtml {
  return html`<section id="summary"><h2>${v.name ? html`<span id="run-name">${nameText(v.name)}</span> · ` : ''}Run <code>${v.run.id}</code> (${v.run.kind}) ${stateBadge(v.run.state)}</h2>
${v.parkReason ? html`<p id="park-reason" class="attention">${v.run.state.replace(/_/g, ' ')}: ${v.parkReason}</p>` : ''}<p id="owner">${v.owner}</p><p class="muted">session <code>${v.run.sessionId}</code> · started ${when(v.run.createdAt)} · updated ${when(v.run.updatedAt)}</p></section>
${actionsSection(v, csrf)}${approvalsSection(v, csrf)}${acceptanceSection(v)}${stepsSection(v, Date.now())}${toolOutputSection(v, Date.now())}${lineageSection(v)}${timelineSection(v)}${tasksSection(v)}${effectsSection(v)}${snapshotsSection(v, csrf)}${diffForm(v.run.id, v.snapshots)}${artifactsSection(v)}${leasesSection(v)}${egressSection(v)}${costSection(v)}${entriesSection(v)}`;
}
