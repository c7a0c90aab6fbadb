"""Are two benchmark databases the same numbers? Join estimates on (run, split, method) and
logits on (run, split, sample) and count the rows that differ.

    PYTHONPATH=. python benchmarks/compare_databases.py NEW.duckdb OLD.duckdb
"""

import duckdb, sys
new = sys.argv[1]
c = duckdb.connect(new, read_only=True)
old = sys.argv[2].replace("'", "''")
c.execute(f"ATTACH '{old}' AS b (READ_ONLY)")
q = """
SELECT count(*) AS n, sum(CASE WHEN n.estimated_accuracy IS NOT DISTINCT FROM o.estimated_accuracy THEN 0 ELSE 1 END) AS differ,
       max(abs(n.estimated_accuracy - o.estimated_accuracy)) AS max_diff,
       sum(CASE WHEN n.true_accuracy = o.true_accuracy THEN 0 ELSE 1 END) AS truth_differ
FROM estimates n JOIN b.estimates o USING (run_key, split, method)
"""
print(c.sql(q).fetchall())
print(c.sql("SELECT run_key, count(*) FROM estimates n JOIN b.estimates o USING (run_key, split, method) GROUP BY 1 ORDER BY 1").fetchall())
print(c.sql("""SELECT count(*), sum(CASE WHEN n.logits = o.logits THEN 0 ELSE 1 END)
   FROM logits n JOIN b.logits o USING (run_key, split, sample_index)""").fetchall())
