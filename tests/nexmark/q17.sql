-- q17 — Auction Statistics Report: how many bids on an auction are made a day,
-- and at what prices?
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q17.sql):
--
--   CREATE TABLE nexmark_q17 (
--     auction BIGINT,
--     `day` VARCHAR,
--     total_bids BIGINT,
--     rank1_bids BIGINT,
--     rank2_bids BIGINT,
--     rank3_bids BIGINT,
--     min_price BIGINT,
--     max_price BIGINT,
--     avg_price BIGINT,
--     sum_price BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q17
--   SELECT
--        auction,
--        DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
--        count(*) AS total_bids,
--        count(*) filter (where price < 10000) AS rank1_bids,
--        count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
--        count(*) filter (where price >= 1000000) AS rank3_bids,
--        min(price) AS min_price,
--        max(price) AS max_price,
--        avg(price) AS avg_price,
--        sum(price) AS sum_price
--   FROM bid
--   GROUP BY auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
--
-- Sink columns: auction, day, total_bids, rank1_bids, rank2_bids, rank3_bids,
-- min_price, max_price, avg_price, sum_price.
--
-- Batch translation: an unbounded group aggregation (no watermark, no
-- lateness; every bid counts in any order; the last update per group is the
-- batch aggregate).  day: the UTC date of dateTime (epoch ms, floor division
-- by 86400000), 'yyyy-MM-dd'.  Price buckets: rank1 < 10000 <= rank2 <
-- 1000000 <= rank3.  avg_price is Flink's BIGINT AVG: sum / count in 64-bit
-- integer division, truncated toward zero.
CREATE TEMP VIEW result AS
SELECT auction, day,
       count(*) AS total_bids,
       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       min(price) AS min_price,
       max(price) AS max_price,
       sum(price) / count(*) AS avg_price,
       sum(price) AS sum_price
  FROM (SELECT auction, price,
               date((dateTime - ((dateTime % 86400000) + 86400000) % 86400000) / 1000,
                    'unixepoch') AS day
          FROM bid)
 GROUP BY auction, day;
