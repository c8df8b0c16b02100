/**
 * Rows come back with the same column names and encodings as SQLite's (JSON as text, BIGINT
 * parsed to numbers by the pool), so the row-to-model mapping is shared.
 */
export { json, toDocument, toEffect, toEntry, toRun, toRunTransition, toSession, toSnapshot, toSubmission, toTask } from '../sqlite/rows';
export type { Row } from '../sqlite/rows';
