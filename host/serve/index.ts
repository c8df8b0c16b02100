export { startServe, isLoopback, type ServeHandle } from './server';
export { loadOrCreateToken, csrfToken, SESSION_COOKIE, sessionCookie, sessionValue } from './auth';
export type { ServeDeps, ServeActions, ReconcileRequest, RunDescription } from './deps';
export type { RunView } from './run-view';
export { escapeHtml, html, SafeHtml } from './html';
