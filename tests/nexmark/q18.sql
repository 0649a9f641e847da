-- q18 — Find last bid: the last bid of each bidder on each auction.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q18.sql):
--
--   CREATE TABLE nexmark_q18 (
--       auction  BIGINT,
--       bidder  BIGINT,
--       price  BIGINT,
--       channel  VARCHAR,
--       url  VARCHAR,
--       `dateTime`  TIMESTAMP(3),
--       extra  VARCHAR
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q18
--   SELECT auction, bidder, price, channel, url, `dateTime`, extra
--    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC) AS rank_number
--          FROM bid)
--    WHERE rank_number <= 1;
--
-- Sink columns: auction, bidder, price, channel, url, datetime, extra
-- (datetime as epoch milliseconds).
--
-- Batch translation: ROW_NUMBER ordered by the event-time attribute DESC,
-- rank <= 1, is Flink's event-time deduplication keeping the last row
-- (RowTimeDeduplicateFunction, keepLastRow): per (bidder, auction) a new bid
-- replaces the kept one when its dateTime >= the kept one's (ties: the later
-- arrival wins); there is no late-data dropping.  At end of input each
-- (bidder, auction) holds its bid with the greatest dateTime, ties going to the
-- highest seq.  Order used: dateTime DESC, seq DESC.
CREATE TEMP VIEW result AS
SELECT auction, bidder, price, channel, url, dateTime, extra
  FROM (SELECT *, row_number() OVER (PARTITION BY bidder, auction
                                     ORDER BY dateTime DESC, seq DESC) AS rank_number
          FROM bid)
 WHERE rank_number <= 1;
