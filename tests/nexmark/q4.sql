-- q4 — Average Price for a Category: the average of the winning bid prices
-- of all auctions in each category.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q4.sql):
--
--   CREATE TABLE nexmark_q4 (
--     id BIGINT,
--     final BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q4
--   SELECT
--       Q.category,
--       AVG(Q.final)
--   FROM (
--       SELECT MAX(B.price) AS final, A.category
--       FROM auction A, bid B
--       WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
--       GROUP BY A.id, A.category
--   ) Q
--   GROUP BY Q.category;
--
-- Sink columns: id (the category, by position), final (the average).
--
-- Batch translation: the join is a regular inner join (equi-key A.id =
-- B.auction plus a non-equi residual condition on plain column values, not an
-- interval join: nothing is dropped or expired, every bid meets every auction
-- with its id whatever the arrival order).  MAX per auction is an unbounded
-- group aggregate that retracts and re-emits its row when the max grows; the
-- outer AVG per category consumes those retractions.  At end of input the
-- materialized result is the batch query: for every auction with at least one
-- bid with A.dateTime <= B.dateTime <= A.expires (both ends inclusive), its max
-- price; per category, the average of those maxima.  A category with no such
-- auction has no row.
--
-- AVG of BIGINT is Flink's BIGINT average: sum / count in 64-bit integer
-- division, truncated toward zero (SQLite's integer / does the same).
-- GROUP BY A.id, A.category: an auction id is unique, so one max per auction.
CREATE TEMP VIEW result AS
SELECT category AS id, sum(final) / count(*) AS final
  FROM (SELECT A.id, A.category, max(B.price) AS final
          FROM auction AS A
          JOIN bid AS B ON B.auction = A.id
                       AND B.dateTime BETWEEN A.dateTime AND A.expires
         GROUP BY A.id, A.category)
 GROUP BY category;
