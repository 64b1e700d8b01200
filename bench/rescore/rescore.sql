-- The reward of reward.yaml in DuckDB SQL: read both Parquet files, join
-- the prompts by prompt_id, extract the answer (last \boxed{...}, else the
-- text after the last "####" on its line, else the last number), compare
-- it numerically, check the format, penalise length, and write the
-- rewards as Parquet. Rows whose status is not "ok" are skipped as rlpipe
-- skips them: null components, a NaN total, status "skipped: <status>".
-- The answer is found with cheap string functions where they suffice
-- (contains, split_part) and regexp_extract_all(...)[-1] for the last match:
-- a '^.*'-anchored regexp_extract for "the last one" measured 5 to 7
-- times slower per expression. The last-number scan sits in a CASE branch, so it
-- runs only on rows with neither marker.
-- Literals are cast to DOUBLE so that DuckDB computes in binary floating
-- point as the other two do (a literal such as 0.2 is otherwise DECIMAL).
-- {{trajectories}}, {{prompts}} and {{out}} are replaced by the benchmark.
COPY (
  WITH joined AS (
    SELECT t.prompt_id, t.sample_index, t.completion, t.num_tokens, t.status, p.answer
    FROM read_parquet('{{trajectories}}') AS t
    LEFT JOIN read_parquet('{{prompts}}') AS p ON p.prompt_id = t.prompt_id
  ),
  extracted AS (
    SELECT *,
      CASE WHEN contains(completion, '\boxed{')
        THEN coalesce(regexp_extract_all(completion, '\\boxed\{([^{}]*)\}', 1)[-1], '') ELSE '' END AS boxed,
      CASE WHEN contains(completion, '####')
        THEN trim(split_part(split_part(completion, '####', -1), chr(10), 1)) ELSE '' END AS hashed
    FROM joined
  ),
  scored AS (
    SELECT prompt_id, sample_index, status,
      CASE WHEN abs(
          TRY_CAST(replace(CASE WHEN boxed <> '' THEN boxed
                                WHEN hashed <> '' THEN hashed
                                ELSE coalesce(regexp_extract_all(completion, '[0-9][0-9,]*(?:\.[0-9]+)?')[-1], '')
                                END, ',', '') AS DOUBLE)
        - TRY_CAST(replace(answer, ',', '') AS DOUBLE)) <= CAST(1e-6 AS DOUBLE)
        THEN CAST(1 AS DOUBLE) ELSE CAST(0 AS DOUBLE) END AS r_correct,
      CASE WHEN contains(completion, '####') OR contains(completion, '\boxed{')
        THEN CAST(1 AS DOUBLE) ELSE CAST(0 AS DOUBLE) END AS r_format,
      CASE WHEN num_tokens > 150 THEN CAST(-0.001 AS DOUBLE) * CAST(num_tokens - 150 AS DOUBLE)
        ELSE CAST(0 AS DOUBLE) END AS r_length
    FROM extracted
  )
  SELECT prompt_id, sample_index,
    CASE WHEN status = 'ok' THEN r_correct END AS r_correct,
    CASE WHEN status = 'ok' THEN r_format END AS r_format,
    CASE WHEN status = 'ok' THEN r_length END AS r_length,
    CASE WHEN status = 'ok'
      THEN CAST(1.0 AS DOUBLE) * r_correct + CAST(0.2 AS DOUBLE) * r_format + CAST(1.0 AS DOUBLE) * r_length
      ELSE CAST('NaN' AS DOUBLE) END AS total,
    CASE WHEN status = 'ok' THEN 'ok' ELSE 'skipped: ' || status END AS status
  FROM scored
) TO '{{out}}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1);
