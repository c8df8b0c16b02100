/**
 * Schema 20 (PostgreSQL): the store-wide commit order is numbered by its readers, not by the
 * commits (see `commit-log.ts`). Schema 12 numbered it in each commit's last statement by bumping a
 * one-row counter whose lock was held through the COMMIT's WAL flush: every commit of every session
 * queued on that one row, so concurrent commits could never share a flush and more hosts made the
 * store no faster. A commit now inserts its row unnumbered (`seq` NULL, `ord` its insertion order);
 * numbers are assigned later, under one advisory lock, to committed rows only.
 */
export const COMMIT_LOG_NUMBERED_BY_READERS_PG = `
  ALTER TABLE commit_log DROP CONSTRAINT commit_log_pkey;
  ALTER TABLE commit_log ALTER COLUMN seq DROP NOT NULL;
  ALTER TABLE commit_log ADD COLUMN ord BIGINT GENERATED ALWAYS AS IDENTITY;
  CREATE UNIQUE INDEX commit_log_by_seq ON commit_log(seq);
  CREATE INDEX commit_log_unnumbered ON commit_log(ord) WHERE seq IS NULL;
  DROP TABLE commit_log_counter;
`;
