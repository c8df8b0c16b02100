/* A tiny SQLite shell: reads SQL statements from stdin and prints each result row as
 * pipe-separated values. Enough to test the library the Makefile builds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sqlite3.h"

static int row(void *unused, int n, char **values, char **names) {
  (void)unused; (void)names;
  for (int i = 0; i < n; i++) printf("%s%s", i ? "|" : "", values[i] ? values[i] : "NULL");
  printf("\n");
  return 0;
}

int main(void) {
  size_t cap = 1 << 16, len = 0;
  char *sql = malloc(cap);
  size_t got;
  while ((got = fread(sql + len, 1, cap - len - 1, stdin)) > 0) {
    len += got;
    if (len + 1 >= cap) sql = realloc(sql, cap *= 2);
  }
  sql[len] = 0;
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 2;
  char *err = 0;
  if (sqlite3_exec(db, sql, row, 0, &err) != SQLITE_OK) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  sqlite3_close(db);
  free(sql);
  return 0;
}
