import { ATTEMPT_TAIL } from './run-view';

/**
 * The page's only script and style, served from this process (`/assets/…`): no CDN, no build step,
 * so pages work offline. Kept as strings so the bundled CLI carries them.
 *
 * live.js: follows the page's event stream (`data-live`, starting after `data-after`); on each
 * commit it re-reads the page's server-rendered fragment (`data-fragment`) and swaps it in. The
 * browser reconnects by itself after a drop and sends `Last-Event-ID`, so no commit is missed.
 * `window.berthLive.events` lists the event ids received (tests compare it with the commit log).
 */
export const LIVE_JS = `(() => {
  const TAIL = ${ATTEMPT_TAIL};
  const live = { events: [], state: 'idle', refreshes: 0 };
  window.berthLive = live;
  const root = document.querySelector('[data-live]');
  if (!root) return;
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do {
        again = false;
        const r = await fetch(root.dataset.fragment, { credentials: 'same-origin' });
        if (r.ok) { const text = await r.text(); live.bytes += text.length; root.innerHTML = text; live.refreshes++; if (live.replay) live.replay(); }
      } while (again);
    } catch (e) { /* the next commit tries again */ } finally { busy = false; }
  }
  const sep = root.dataset.live.includes('?') ? '&' : '?';
  const es = new EventSource(root.dataset.live + sep + 'after=' + encodeURIComponent(root.dataset.after || '0'));
  live.source = es;
  es.addEventListener('open', () => { live.state = 'open'; live.opens = (live.opens || 0) + 1; });
  es.addEventListener('error', () => { live.state = 'reconnecting'; });
  // The runs list: a commit re-reads only its session's rows (data-rows), never the whole list.
  live.bytes = 0;
  const dirty = new Set();
  let rowsBusy = false;
  async function rows() {
    if (rowsBusy || dirty.size === 0) return;
    rowsBusy = true;
    try {
      while (dirty.size) {
        const sessions = [...dirty].slice(0, 50);
        for (const s of sessions) dirty.delete(s);
        const sep = root.dataset.rows.includes('?') ? '&' : '?';
        const r = await fetch(root.dataset.rows + sep + sessions.map((s) => 'session=' + encodeURIComponent(s)).join('&'), { credentials: 'same-origin' });
        if (!r.ok) continue;
        const text = await r.text();
        live.bytes += text.length;
        const t = document.createElement('template');
        t.innerHTML = text;
        const body = root.querySelector('#runs tbody');
        if (!body) { refresh(); continue; }
        const fresh = [...t.content.querySelectorAll('tr[data-run]')];
        const kept = new Set(fresh.map((tr) => tr.dataset.run));
        // A run of these sessions that no longer matches the filter leaves the list.
        for (const tr of body.querySelectorAll('tr[data-session]')) if (sessions.includes(tr.dataset.session) && !kept.has(tr.dataset.run)) tr.remove();
        // A run not on this page is added only when it is newer than every run shown (a new run on
        // the first page); an older run that committed belongs to a later page.
        const first = !/[?&]page=/.test(location.search);
        const newest = Math.max(0, ...[...body.querySelectorAll('tr[data-created]')].map((tr) => Number(tr.dataset.created)));
        for (const tr of fresh.reverse()) {
          const old = body.querySelector('tr[data-run="' + CSS.escape(tr.dataset.run) + '"]');
          if (old) old.replaceWith(tr);
          else if (first && Number(tr.dataset.created) >= newest) body.prepend(tr);
        }
        live.refreshes++;
      }
    } catch (e) { /* the next commit tries again */ } finally { rowsBusy = false; }
  }
  es.addEventListener('commit', (ev) => {
    live.events.push(Number(ev.lastEventId));
    live.lastEventAt = Date.now();
    live.bytes += ev.data.length + ev.lastEventId.length + 20;
    if (root.dataset.rows) {
      try { dirty.add(JSON.parse(ev.data).sessionId); } catch (e) { return; }
      setTimeout(rows, 30);
    } else refresh();
  });
  // Live output: chunks appended as text (never markup) to their attempt's <pre>, each once (data-seq);
  // after a fragment swap the recent chunks are applied again, so none the swap dropped is lost.
  const outHost = root.querySelector('[data-output]');
  if (outHost) {
    live.output = [];
    const recent = [];
    const scrolling = new Set();
    const place = (c) => {
      let pre = root.querySelector('pre.live[data-attempt="' + CSS.escape(c.attempt) + '"]');
      if (!pre) {
        const host = root.querySelector('[data-source="' + CSS.escape(c.source) + '"]') || root.querySelector('[data-output]');
        if (!host) return;
        const div = document.createElement('div');
        div.className = 'attempt';
        div.dataset.attempt = c.attempt;
        div.dataset.attemptState = 'running';
        const p = document.createElement('p');
        p.className = 'muted';
        p.textContent = (c.source.startsWith('tool:') ? 'tool ' : 'step ') + c.label + ' · attempt started ' + new Date(c.at).toISOString() + ' · running for ';
        const el = document.createElement('span');
        el.className = 'elapsed';
        el.dataset.since = String(c.at);
        el.textContent = '0s';
        p.append(el);
        pre = document.createElement('pre');
        pre.className = 'live';
        pre.dataset.attempt = c.attempt;
        pre.dataset.seq = '0';
        div.append(p, pre);
        host.append(div);
      }
      if (c.seq <= Number(pre.dataset.seq || 0)) return;
      pre.dataset.seq = String(c.seq);
      if (c.channel === 'end') {
        const head = pre.previousElementSibling;
        if (head) { for (const e of head.querySelectorAll('.elapsed')) e.remove(); head.textContent = head.textContent.replace(/ · running for $/, '') + ' · ' + c.text; }
        return;
      }
      if (c.channel === 'stderr') { const s = document.createElement('span'); s.className = 'err'; s.textContent = c.text; pre.append(s); }
      else pre.append(document.createTextNode(c.text));
      // The end of the output only, as the server renders it: a step printing megabytes made every
      // chunk lay out all of them again (4 MB froze the tab for a minute and a half).
      let over = pre.textContent.length - TAIL;
      while (over > 0 && pre.firstChild) {
        const n = pre.firstChild, len = n.textContent.length;
        if (len <= over) { n.remove(); over -= len; } else { n.textContent = n.textContent.slice(over); over = 0; }
      }
      // One scroll a frame, not one per chunk: each forces a layout.
      if (!scrolling.has(pre)) { scrolling.add(pre); requestAnimationFrame(() => { scrolling.delete(pre); pre.scrollTop = pre.scrollHeight; }); }
    };
    live.replay = () => { for (const c of recent) place(c); };
    const osep = outHost.dataset.output.includes('?') ? '&' : '?';
    const os = new EventSource(outHost.dataset.output + osep + 'after=' + encodeURIComponent(outHost.dataset.outputAfter || '0'));
    live.outputSource = os;
    os.addEventListener('output', (ev) => {
      const c = JSON.parse(ev.data);
      recent.push(c);
      if (recent.length > 2000) recent.shift();
      place(c);
      live.output.push({ seq: c.seq, at: Date.now() });
      if (live.output.length > 5000) live.output.shift();
    });
  }
  // Running steps show how long they have run: counted here between commits.
  const fmt = (ms) => { const s = Math.round(ms / 1000); return s < 60 ? s + 's' : s < 3600 ? Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's' : Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm'; };
  setInterval(() => { for (const e of root.querySelectorAll('.elapsed[data-since]')) e.textContent = fmt(Date.now() - Number(e.dataset.since)); }, 1000);
})();
`;

export const STYLE_CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
header { background: #14202e; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: baseline; }
header a { color: #cfe3ff; }
main { padding: 12px 16px; }
section { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; margin: 0 0 12px; padding: 8px 12px; }
section > h2 { font-size: 15px; margin: 2px 0 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eef0f3; vertical-align: top; }
pre { background: #0f1720; color: #e6edf3; padding: 6px 8px; overflow-x: auto; max-height: 24em; margin: 4px 0; white-space: pre-wrap; word-break: break-all; }
.state { font-weight: 600; padding: 1px 6px; border-radius: 4px; background: #e9edf2; }
.state-completed { background: #d6f5dd; } .state-failed { background: #fbd9d9; } .state-running { background: #dbe9ff; }
.state-needs_reconciliation, .state-awaiting_approval { background: #ffe8b3; }
.attention { border-left: 4px solid #f0a500; }
.muted { color: #6a7580; }
.notice { border-left: 4px solid #f0a500; padding-left: 0.5em; }
.textdiff pre { background: #f6f8fa; color: #1f2328; padding: 6px; overflow-x: auto; }
.textdiff .add { background: #e6ffec; display: block; }
.textdiff .del { background: #ffebe9; display: block; }
.textdiff .ctx { display: block; }
.textdiff .gap { color: #6a7580; display: block; }
.ctl { font-family: monospace; font-size: 0.85em; color: #a40000; border: 1px solid #d99; border-radius: 2px; padding: 0 1px; }
.tag { display: inline-block; font-size: 0.8em; background: #e4ecf5; border-radius: 3px; padding: 0 4px; margin-left: 4px; }
.said { margin: 12px 16px 0; background: #fff7d6; border: 1px solid #f0d27a; padding: 6px 10px; border-radius: 4px; margin-bottom: 12px; }
form.inline { display: inline; }
button { cursor: pointer; }
code { font-size: 12px; }
pre .err { color: #ffb4a8; } pre .cut { color: #f0d27a; font-style: italic; }
.attempt-state.interrupted { color: #b3261e; font-weight: 600; } .attempt-state.running { color: #1f5fbf; font-weight: 600; }
table.receipt { width: auto; font-size: 12px; } table.receipt th { color: #6a7580; font-weight: 500; }
#filter { margin: 0 0 8px; } #park-reason { padding: 4px 8px; background: #fff7d6; }
.step { padding: 4px 0; border-bottom: 1px solid #eef0f3; } .step[data-state="pending"] { color: #6a7580; }
`;
