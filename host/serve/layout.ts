import { html, type SafeHtml } from './html';

/** The page shell: local style and script only. `said` (what an action did) stays outside the live part. */
export function layout(title: string, body: SafeHtml, live?: { events: string; fragment: string; after: number; rows?: string }, said?: string, saidLink?: { href: string; text: string }): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · berth</title><link rel="stylesheet" href="/assets/style.css"></head>
<body><header><strong>berth</strong><a href="/">runs</a><span class="muted">${title}</span></header>
${said ? html`<p class="said" id="said">${said}${saidLink ? html` <a id="said-link" href="${saidLink.href}">${saidLink.text}</a>` : ''}</p>` : ''}
${live ? html`<main data-live="${live.events}" data-fragment="${live.fragment}" data-after="${live.after}"${live.rows ? html` data-rows="${live.rows}"` : ''}>${body}</main>` : html`<main>${body}</main>`}
<script src="/assets/live.js"></script></body></html>`;
}

/** A POST form with the CSRF token: every state change on a page goes through one. */
export function postForm(action: string, csrf: string, label: string, fields: Record<string, string> = {}, extra?: SafeHtml): SafeHtml {
  return html`<form class="inline" method="post" action="${action}"><input type="hidden" name="_csrf" value="${csrf}">${Object.entries(fields).map(
    ([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`,
  )}${extra}<button type="submit">${label}</button></form>`;
}

export const when = (ms: number | null | undefined): string => (ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—');

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export const stateBadge = (state: string) => html`<span class="state state-${state}" data-state="${state}">${state}</span>`;
