/**
 * Rows come back with the same column names and encodings as SQLite's (JSON as text, BIGINT
 * parsed to numbers by the pool), so the row-to-model mapping is shared.
 */
export { json, parse, toDocument, toEffect, toEntry, toRun, toRunTransition, toSnapshot, toSubmission, toTask } from '../sqlite/rows';
export type { Row } from '../sqlite/rows';
