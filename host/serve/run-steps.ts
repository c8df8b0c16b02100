import { html, nameText, type SafeHtml } from './html';
import { duration, when } from './layout';
import type { AttemptView, RunView, StepView } from './run-view';

const none = (what: string) => html`<p class="muted">${what}</p>`;

/** An attempt's output as it printed, stderr marked, with where the cap cut it. */
export function attemptOutput(a: AttemptView): SafeHtml {
  return html`<pre class="live" data-attempt="${a.attempt}" data-seq="${a.lastSeq}">${a.parts.map((p) =>
    p.channel === 'stdout' ? p.text : p.channel === 'stderr' ? html`<span class="err">${p.text}</span>` : html`<span class="cut">${p.text}\n</span>`,
  )}</pre>`;
}

/** What became of an attempt, in words: running, cut off by a crash (its output kept), or how it ended. */
export function attemptBlock(kind: string, a: AttemptView, now: number): SafeHtml {
  const head =
    a.state === 'interrupted'
      ? html`<span class="attempt-state interrupted">interrupted</span> — its host stopped while it ran; the output it printed until then`
      : a.state === 'running'
        ? html`<span class="attempt-state running">running</span> for <span class="elapsed" data-since="${a.startedAt}">${duration(now - a.startedAt)}</span>`
        : html`<span class="attempt-state ended">${a.end}</span>`;
  return html`<div class="attempt" data-attempt="${a.attempt}" data-attempt-state="${a.state}"><p class="muted">${kind} ${nameText(a.label)} · attempt started ${when(a.startedAt)} · ${head}${a.cutBytes ? ` · ${a.cutBytes} bytes cut by the cap` : ''}</p>${attemptOutput(a)}</div>`;
}

/**
 * A finished attempt whose step result keeps the tails: one line, and an empty <pre> that tells the
 * page's script which of its chunks are shown already (by the tails below), so none is added again.
 */
function endedLine(kind: string, a: AttemptView): SafeHtml {
  return html`<div class="attempt" data-attempt="${a.attempt}" data-attempt-state="ended"><p class="muted">${kind} ${nameText(a.label)} · attempt started ${when(a.startedAt)} · <span class="attempt-state ended">${a.end}</span>${a.cutBytes ? ` · ${a.cutBytes} bytes cut by the cap` : ''}</p><pre class="live" data-attempt="${a.attempt}" data-seq="${a.lastSeq}" hidden></pre></div>`;
}

function stepHead(s: StepView, now: number): SafeHtml {
  const running = s.attempts.filter((a) => a.state === 'running').at(-1);
  const state =
    s.state === 'running' && running
      ? html`running for <span class="elapsed" data-since="${running.startedAt}">${duration(now - running.startedAt)}</span>`
      : html`${s.status}`;
  return html`<strong>${nameText(s.name)}</strong> <span class="step-state">${state}</span>${s.exitCode !== null ? ` · exit ${s.exitCode}` : ''}${s.durationMs !== null ? ` · ${duration(s.durationMs)}` : ''}${s.snapshotId ? html` · snapshot <code>${s.snapshotId}</code>` : ''}`;
}

/**
 * Every step of a plan in order, pending ones included. A finished step shows the tails its result
 * kept; an attempt still running, or cut off by a crash, shows its live output (appended by the
 * page's script as it arrives).
 */
export function stepsSection(v: RunView, now: number): SafeHtml {
  if (v.run.kind !== 'plan') return html``;
  const body = v.steps.length === 0
    ? none('no step started yet')
    : html`${v.steps.map(
        (s) => html`<div class="step" data-step="${s.name}" data-state="${s.state}" data-source="${s.index !== null ? `step:${s.index}` : ''}">${stepHead(s, now)}
${s.attempts.map((a) => (a.state === 'ended' && (s.stdoutTail || s.stderrTail) ? endedLine('step', a) : attemptBlock('step', a, now)))}${s.stdoutTail ? html`<pre class="stdout">${s.stdoutTail}</pre>` : ''}${s.stderrTail ? html`<pre class="stderr">${s.stderrTail}</pre>` : ''}</div>`,
      )}`;
  const { earlier, later } = v.stepsNotShown ?? { earlier: 0, later: 0 };
  const before = earlier ? html`<p class="muted steps-earlier">${earlier} earlier step${earlier === 1 ? '' : 's'} not listed here (berth show ${v.run.id} --all lists every step)</p>` : '';
  const after = later ? html`<p class="muted steps-later">and ${later} more pending step${later === 1 ? '' : 's'}</p>` : '';
  return html`<section id="steps" data-output="/api/runs/${v.run.id}/output" data-output-after="${v.outputSeq}"><h2>Steps</h2>${before}${body}${after}</section>`;
}

/** An agent run's tool calls with live output (the running ones, and those a crash cut off), newest last. */
export function toolOutputSection(v: RunView, now: number): SafeHtml {
  if (v.run.kind !== 'agent') return html``;
  const shown = v.output.filter((a) => a.source.startsWith('tool:')).slice(-20);
  return html`<section id="live-output" data-output="/api/runs/${v.run.id}/output" data-output-after="${v.outputSeq}"><h2>Tool output</h2>${shown.length ? shown.map((a) => attemptBlock('tool', a, now)) : none('no tool call printed anything yet')}</section>`;
}
