-- q7 — Highest Bid: the highest bids per 10 s period.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q7.sql):
--
--   CREATE TABLE nexmark_q7 (
--     auction  BIGINT,
--     bidder  BIGINT,
--     price  BIGINT,
--     `dateTime`  TIMESTAMP(3),
--     extra  VARCHAR
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q7
--   SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
--   from bid B
--   JOIN (
--     SELECT MAX(price) AS maxprice, window_end as `dateTime`
--     FROM TABLE(
--             TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
--     GROUP BY window_start, window_end
--   ) B1
--   ON B.price = B1.maxprice
--   WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`;
--
-- Sink columns: auction, bidder, price, datetime, extra.
--
-- Column order: upstream's SELECT lists B.price before B.bidder while the sink
-- declares bidder before price, so Flink's positional INSERT writes the price
-- into `bidder` and the bidder into `price` (an upstream slip; older versions
-- of the file select B.bidder, B.price).  The oracle follows the sink's names:
-- bidder holds B.bidder, price holds B.price.
--
-- Timestamps (datetime here, and every TIMESTAMP(3) sink column in these
-- files) are written as epoch milliseconds, like the input CSVs.
--
-- B1: TUMBLE(10 s) by the event-time attribute dateTime, aligned to the epoch:
-- a bid at t is in [end - 10000, end) with end = floor(t / 10000) * 10000 +
-- 10000.  Late data: bid.wm is the watermark in force when the bid arrives
-- (oracle.sh); the window fires once the watermark reaches end - 1, and a bid
-- arriving after that is dropped from it (Flink: isWindowFired(windowEnd,
-- watermark) = watermark >= windowEnd - 1).  Rule: a bid counts in its window
-- iff end - 1 > bid.wm.  At end of input all windows fire; a window with no
-- counted bid has no row.  B1's dateTime is window_end.
--
-- The outer join is a regular join, not an interval join: B1.dateTime is
-- window_end, a plain TIMESTAMP (window_time would be the time attribute), so
-- Flink keeps every bid in state and nothing is dropped on the B side: every
-- bid, late or not, joins every fired B1 row with B.price = maxprice and
-- end - 10000 <= B.dateTime <= end (BETWEEN: both ends inclusive, so a bid at
-- exactly a window end also matches that window's max).  Append-only inputs,
-- inner join: the end-of-input result is the batch join, a bag.
CREATE TEMP VIEW result AS
WITH B1 AS (
  SELECT wend, max(price) AS maxprice
    FROM (SELECT price, wm, dateTime - ((dateTime % 10000) + 10000) % 10000 + 10000 AS wend
            FROM bid)
   WHERE wend - 1 > wm
   GROUP BY wend)
SELECT B.auction AS auction, B.bidder AS bidder, B.price AS price,
       B.dateTime AS dateTime, B.extra AS extra
  FROM B1
  JOIN bid AS B ON B.price = B1.maxprice
               AND B.dateTime BETWEEN B1.wend - 10000 AND B1.wend;
