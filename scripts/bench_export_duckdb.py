"""Design (b) of issue 15, measured (not a test, not in `make bench`): DuckDB over the
JSON Lines log of `scripts/bench_export.py --keep DIR` (its DIR/nN directory).

    pip install duckdb; .venv/bin/python scripts/bench_export_duckdb.py DIR/n100000 [threads]

Not the full export, its core (a lower bound): read every line, check both
sha256s, extract the chat messages and the response content, join the labels
by (query_id, chunk_sha), a per-trajectory r_format, turns to parquet (zstd).
No schema validation, no file:line:field errors, no trajectories.jsonl, no
advantages. Measured on the 100k-turn bench log (2 shared cores): 6.0 CPU-s
(the export: 10.6), 1.4 GiB peak RSS (the export: 261 MiB, flat), since the
ORDER BY and the window materialise the log.
"""

import resource
import sys
import time

import duckdb  # not a grumem dependency

w = sys.argv[1]
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
con = duckdb.connect()
con.execute(f"SET threads={threads}")
t0 = time.perf_counter()
con.execute(f"""
COPY (
WITH log AS (
  SELECT * FROM read_json('{w}/log.jsonl', format='newline_delimited',
     maximum_object_size=100000000, columns={{
      'trajectory_id':'VARCHAR','project':'VARCHAR','query_id':'VARCHAR','session':'VARCHAR',
      'sample':'BIGINT','level':'VARCHAR','model':'VARCHAR','t':'BIGINT','chunk_sha':'VARCHAR',
      'status':'VARCHAR','asks':'BIGINT','parsed':'BOOLEAN','update_gate':'BOOLEAN','exit_gate':'BOOLEAN',
      'content':'VARCHAR',
      'request':'STRUCT(body VARCHAR, sha256 VARCHAR)',
      'response':'STRUCT(attempt BIGINT, status BIGINT, body VARCHAR, sha256 VARCHAR)'}})
), labels AS (
  SELECT * FROM read_json('{w}/labels.jsonl', format='newline_delimited')
), checked AS (
  SELECT log.*, sha256(request.body) = request.sha256 AS req_ok,
         sha256(response.body) = response.sha256 AS resp_ok,
         CAST(json_extract(request.body, '$.messages')
              AS STRUCT(role VARCHAR, content VARCHAR)[]) AS prompt,
         json_extract_string(response.body, '$.choices[0].message.content') AS answer,
         labels.evidence AS label
  FROM log LEFT JOIN labels USING (query_id, chunk_sha)
)
SELECT 'grumem' AS data_source, prompt, 'memory_gating' AS ability,
  {{'style': 'rule', 'ground_truth': CASE WHEN label THEN 'yes' ELSE 'no' END}} AS reward_model,
  {{'trajectory_id': trajectory_id, 't': t, 'chunk_sha': chunk_sha, 'label': label,
    'response': answer,
    'r_update': CASE WHEN update_gate = label THEN 1 ELSE -1 END,
    'r_format': CAST(bool_and(parsed) OVER (PARTITION BY trajectory_id) AS INT),
    'ok': req_ok AND resp_ok AND answer = content}} AS extra_info
FROM checked ORDER BY trajectory_id, t
) TO '{w}/duck.parquet' (FORMAT parquet, COMPRESSION zstd)
""")
dt = time.perf_counter() - t0
n = con.execute(f"SELECT count(*), bool_and(extra_info.ok) FROM '{w}/duck.parquet'").fetchone()
u = resource.getrusage(resource.RUSAGE_SELF)
print(
    f"duckdb threads={threads}: {n[0]} turns in {dt:.1f} s = {n[0] / dt:.0f} turns/s"
    f" (CPU {u.ru_utime + u.ru_stime:.1f} s), all ok {n[1]},"
    f" peak RSS {u.ru_maxrss / 1024:.0f} MiB"
)
