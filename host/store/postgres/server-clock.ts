/**
 * The PostgreSQL server's clock in epoch milliseconds, as an SQL expression, unless the statement
 * is given the database clock in `param` (a test's `dbClock`; NULL means the server's). Read
 * inside the statement that compares or writes it, so no host clock and no extra round trip is
 * involved. clock_timestamp, not now(): now() is frozen at the transaction's start.
 */
export const serverNowMs = (param?: string): string => {
  const server = '(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint';
  return param ? `COALESCE(${param}::bigint, ${server})` : server;
};
