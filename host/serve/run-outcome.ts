import { html, jsonText, nameText, type SafeHtml } from './html';
import { when } from './layout';
import { section } from './run-sections';
import type { RunView, TreeNode } from './run-view';

const none = (what: string) => html`<p class="muted">${what}</p>`;
const fixed = (n: number, d = 3) => (Number.isInteger(n) ? String(n) : n.toFixed(d));

/** Acceptance: state, who decided and when, why, and the acceptance command's evidence. */
export function acceptanceSection(v: RunView): SafeHtml {
  const a = v.acceptance;
  const head = html`<p id="acceptance-state">acceptance: <strong>${a.state}</strong>${a.actor ? html` by <span class="actor">${a.actor}</span>` : ''}${a.at ? ` at ${when(a.at)}` : ''}${a.reason ? ` (${a.reason})` : ''}${a.decisions > 1 ? ` · ${a.decisions} decisions` : ''}</p>`;
  const hint = a.state === 'pending' ? none('the run completed; accept or reject it under Actions (berth accept / berth reject)') : a.state === 'none' ? none('acceptance is decided once the run completes') : html``;
  return section('acceptance', 'Acceptance', html`${head}${hint}${a.evidence !== null ? html`<p>evidence:</p><pre class="evidence">${jsonText(a.evidence)}</pre>` : ''}`);
}

/** Cost: tokens by model, sandbox CPU and memory, lease time, snapshot bytes, approval wait, recovery work. */
export function costSection(v: RunView): SafeHtml {
  const c = v.cost;
  const rows: Array<[string, string]> = Object.entries(c.tokens).map(([model, t]) => [`tokens ${model}`, `${t.prompt} prompt (${t.cached} cached), ${t.completion} completion, ${t.requests} requests`]);
  rows.push(['sandbox CPU', `${fixed(c.cpuSeconds)} s over ${c.execs} exec(s)`]);
  rows.push(['sandbox memory', `${fixed(c.memoryGbSeconds)} GB-s`]);
  rows.push(['lease time', `${fixed(c.leaseSeconds, 1)} s`]);
  rows.push(['snapshots stored', `${c.snapshotBytes} bytes (${c.snapshotGbMonths.toExponential(2)} GB-months)`]);
  rows.push(['approval wait', `${fixed(c.approvalWaitSeconds, 1)} s`]);
  rows.push(['recovery', `${c.recovery.stepsRerun} steps re-run, ${c.recovery.restores} restores`]);
  return section('cost', 'Cost', html`${v.tokens ? html`<p class="tokens">tokens: ${v.tokens.prompt} prompt + ${v.tokens.completion} completion = ${v.tokens.total}</p>` : ''}<table><tbody>${rows.map(
    ([k, val]) => html`<tr data-cost="${k}"><th>${k}</th><td>${val}</td></tr>`,
  )}</tbody></table>`);
}

/** Artifacts as they stand, each downloadable (streamed from the artifact store, digest checked). */
export function artifactsSection(v: RunView): SafeHtml {
  return section('artifacts', 'Artifacts', v.artifacts.length === 0 ? none('no artifacts recorded') : html`<table><thead><tr><th>path</th><th>step</th><th>size</th><th>sha256</th><th></th></tr></thead><tbody>${v.artifacts.map(
    (a) => html`<tr data-artifact="${a.path}"><td><code>${nameText(a.path)}</code></td><td>${nameText(a.step)}</td><td>${a.sizeBytes} bytes</td><td><code class="sha256">${a.sha256}</code></td><td><a class="download" href="${a.href}" download>download</a></td></tr>`,
  )}</tbody></table>`);
}

/** Lineage: the run this one was forked from, and the runs forked from it. */
export function lineageSection(v: RunView): SafeHtml {
  const parent = v.forkedFrom
    ? html`<p id="forked-from">forked from <a href="/runs/${v.forkedFrom.runId}">${v.forkedFrom.runId}</a> at ${nameText(v.forkedFrom.checkpoint)} (snapshot <code>${v.forkedFrom.snapshotId}</code>)</p>`
    : html``;
  const forks = v.forks.length
    ? html`<p>forks:</p><ul id="forks">${v.forks.map((f) => html`<li data-fork="${f.runId}"><a href="/runs/${f.runId}">${f.runId}</a> ${f.state}</li>`)}</ul>`
    : html``;
  // The whole tree, every depth, this run marked: a fork of a fork is reachable from any run in it.
  const node = (n: TreeNode): SafeHtml =>
    html`<li data-tree-run="${n.runId}"${n.runId === v.run.id ? html` class="current"` : ''}><a href="/runs/${n.runId}">${n.runId}</a> ${n.state}${n.checkpoint ? html` <span class="muted">at ${nameText(n.checkpoint)}</span>` : ''}${n.children.length ? html`<ul>${n.children.map(node)}</ul>` : ''}</li>`;
  const tree = v.tree ? html`<p>fork tree:</p><ul id="fork-tree">${node(v.tree)}</ul>` : html``;
  return section('lineage', 'Lineage', v.forkedFrom || v.forks.length ? html`${parent}${forks}${tree}` : none('an original run with no forks'));
}
