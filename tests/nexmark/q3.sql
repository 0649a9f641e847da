-- q3 — Local Item Suggestion: who is selling in OR, ID or CA in category 10,
-- and for what auction ids?
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q3.sql):
--
--   CREATE TABLE nexmark_q3 (
--     name  VARCHAR,
--     city  VARCHAR,
--     state  VARCHAR,
--     id  BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q3
--   SELECT
--       P.name, P.city, P.state, A.id
--   FROM
--       auction AS A INNER JOIN person AS P on A.seller = P.id
--   WHERE
--       A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
--
-- Sink columns: name, city, state, id (id = the auction's id).
--
-- Batch translation: a regular (unwindowed) inner equi-join of two
-- append-only inputs with per-row filters.  Flink keeps both sides in state
-- forever and emits a row whenever a match completes, whichever side arrives
-- second, and never retracts: the end-of-input result is exactly the batch
-- join, a bag (one row per matching (auction, person) pair).  No watermark or
-- lateness plays a part: every event counts, in any order.
CREATE TEMP VIEW result AS
SELECT P.name AS name, P.city AS city, P.state AS state, A.id AS id
  FROM auction AS A
  JOIN person AS P ON A.seller = P.id
 WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA');
