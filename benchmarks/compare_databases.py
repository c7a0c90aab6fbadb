"""Are two benchmark databases the same numbers? Join estimates on (run, split, method) and
logits on (run, split, sample) and count the rows that differ.

The second line counts, over the same joined estimate rows, the rows where any stored value
differs: the estimate, its sampling interval and level, the shift band, the parameters, the
diagnostics and the per-class estimates (timings, code version and creation time are not
values and are left out; so are the timings inside the diagnostics, ALSA's ``fit_seconds``).

    PYTHONPATH=. python benchmarks/compare_databases.py NEW.duckdb OLD.duckdb
"""

import json
import sys

import duckdb
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
VALUES = ("estimated_accuracy", "true_accuracy", "abs_error", "interval_low", "interval_high",
          "interval_level", "shift_low", "shift_high", "params_json", "per_class_json")
every = " OR ".join(f"n.{v} IS DISTINCT FROM o.{v}" for v in VALUES)
per_column = ", ".join(f"sum(CASE WHEN n.{v} IS DISTINCT FROM o.{v} THEN 1 ELSE 0 END)"
                       for v in VALUES)
row = c.execute(f"""SELECT count(*), sum(CASE WHEN {every} THEN 1 ELSE 0 END), {per_column}
    FROM estimates n JOIN b.estimates o USING (run_key, split, method)""").fetchall()[0]


def _untimed(text):
    """Diagnostics without their timings (keys ending in ``_seconds``)."""
    if text is None:
        return None
    return {k: v for k, v in json.loads(text).items() if not k.endswith("_seconds")}


pairs = c.execute(f"""SELECT n.diagnostics_json, o.diagnostics_json, {every}
    FROM estimates n JOIN b.estimates o USING (run_key, split, method)""")
diag = [(_untimed(a) != _untimed(b), bool(other)) for a, b, other in pairs.fetchall()]
differing = sum(d or o for d, o in diag)
print("all stored values: rows compared", row[0], "rows differing", differing)
print("  differing per column:", {**dict(zip(VALUES, row[2:])),
                                  "diagnostics_json (timings left out)": sum(d for d, _ in diag)})
print("rows only in one database:", c.execute("""SELECT
    (SELECT count(*) FROM estimates n ANTI JOIN b.estimates o USING (run_key, split, method)),
    (SELECT count(*) FROM b.estimates o ANTI JOIN estimates n USING (run_key, split, method))
    """).fetchall()[0])
print(c.sql("SELECT run_key, count(*) FROM estimates n JOIN b.estimates o USING (run_key, split, method) GROUP BY 1 ORDER BY 1").fetchall())
print(c.sql("""SELECT count(*), sum(CASE WHEN n.logits = o.logits THEN 0 ELSE 1 END)
   FROM logits n JOIN b.logits o USING (run_key, split, sample_index)""").fetchall())
print("anchors (compared, differing):", c.sql("""SELECT count(*), sum(CASE WHEN
   n.position = o.position AND n.peak IS NOT DISTINCT FROM o.peak
   AND n.variance IS NOT DISTINCT FROM o.variance THEN 0 ELSE 1 END)
   FROM anchors n JOIN b.anchors o USING (run_key, method, anchor_index)""").fetchall())
