-- q15 — Bidding Statistics Report: how many distinct users join the bidding
-- at different price levels, per day?
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q15.sql):
--
--   CREATE TABLE nexmark_q15 (
--     `day` VARCHAR,
--     total_bids BIGINT,
--     rank1_bids BIGINT,
--     rank2_bids BIGINT,
--     rank3_bids BIGINT,
--     total_bidders BIGINT,
--     rank1_bidders BIGINT,
--     rank2_bidders BIGINT,
--     rank3_bidders BIGINT,
--     total_auctions BIGINT,
--     rank1_auctions BIGINT,
--     rank2_auctions BIGINT,
--     rank3_auctions BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q15
--   SELECT
--        DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
--        count(*) AS total_bids,
--        count(*) filter (where price < 10000) AS rank1_bids,
--        count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
--        count(*) filter (where price >= 1000000) AS rank3_bids,
--        count(distinct bidder) AS total_bidders,
--        count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
--        count(distinct bidder) filter (where price >= 10000 and price < 1000000) AS rank2_bidders,
--        count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
--        count(distinct auction) AS total_auctions,
--        count(distinct auction) filter (where price < 10000) AS rank1_auctions,
--        count(distinct auction) filter (where price >= 10000 and price < 1000000) AS rank2_auctions,
--        count(distinct auction) filter (where price >= 1000000) AS rank3_auctions
--   FROM bid
--   GROUP BY DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
--
-- Sink columns: day, total_bids, rank1_bids, rank2_bids, rank3_bids,
-- total_bidders, rank1_bidders, rank2_bidders, rank3_bidders, total_auctions,
-- rank1_auctions, rank2_auctions, rank3_auctions.
--
-- Batch translation: an unbounded (non-windowed) group aggregation: no
-- watermark, no lateness, every bid counts in any order; Flink updates the
-- day's row on every bid and the last update is the batch aggregate.  day =
-- DATE_FORMAT of the timestamp: the UTC calendar date of dateTime (epoch ms,
-- floor division by 86400000), 'yyyy-MM-dd'.  Price buckets: rank1 < 10000 <=
-- rank2 < 1000000 <= rank3.  The FILTERed COUNT DISTINCTs count distinct
-- values among the day's bids that pass the filter (0 when none do).
CREATE TEMP VIEW result AS
SELECT day,
       count(*) AS total_bids,
       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       count(DISTINCT bidder) AS total_bidders,
       count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
       count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
       count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
       count(DISTINCT auction) AS total_auctions,
       count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
       count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
       count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
  FROM (SELECT bidder, auction, price,
               date((dateTime - ((dateTime % 86400000) + 86400000) % 86400000) / 1000,
                    'unixepoch') AS day
          FROM bid)
 GROUP BY day;
