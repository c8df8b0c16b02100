CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n INTEGER);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000)
INSERT INTO t(name, n) SELECT 'row' || x, x * x % 977 FROM c;
SELECT count(*), sum(n), max(n) FROM t;
CREATE INDEX t_n ON t(n);
SELECT name FROM t WHERE n = 4 ORDER BY id;
SELECT sqlite_compileoption_used('THREADSAFE=0');
SELECT json_extract('{"a":[1,2,{"b":"ok"}]}', '$.a[2].b');
