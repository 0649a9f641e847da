-- q19 — Auction TOP-10 Price: the 10 highest-priced bids of each auction.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q19.sql):
--
--   CREATE TABLE nexmark_q19 (
--       auction  BIGINT,
--       bidder  BIGINT,
--       price  BIGINT,
--       channel  VARCHAR,
--       url  VARCHAR,
--       `dateTime`  TIMESTAMP(3),
--       extra  VARCHAR,
--       rank_number  BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q19
--   SELECT * FROM
--   (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid)
--   WHERE rank_number <= 10;
--
-- Sink columns: auction, bidder, price, channel, url, datetime, extra,
-- rank_number (datetime as epoch milliseconds).
--
-- Batch translation: Flink's append-only Top-N (AppendOnlyTopNFunction) with
-- the row number in the output; it retracts and re-emits rows as their
-- numbers shift, and at end of input each auction holds its top 10 with their
-- final numbers 1..10 (fewer if the auction has fewer bids).  No watermark or
-- lateness.  Ties on price: the order is price only, and Flink's Top-N buffer
-- keeps rows with equal sort keys in arrival order (a new row with the price of
-- the current 10th is not admitted; the one evicted is the last arrival at the
-- lowest price), so the earlier arrival ranks first, whatever the dateTimes.
-- Order used: price DESC, seq ASC.
CREATE TEMP VIEW result AS
SELECT auction, bidder, price, channel, url, dateTime, extra, rank_number
  FROM (SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC, seq ASC)
                  AS rank_number
          FROM bid)
 WHERE rank_number <= 10;
