-- q20 — Expand bid with auction: every bid with its auction's details, for
-- auctions of category 10.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q20.sql):
--
--   CREATE TABLE nexmark_q20 (
--       auction  BIGINT,
--       bidder  BIGINT,
--       price  BIGINT,
--       channel  VARCHAR,
--       url  VARCHAR,
--       bid_dateTime  TIMESTAMP(3),
--       bid_extra  VARCHAR,
--
--       itemName  VARCHAR,
--       description  VARCHAR,
--       initialBid  BIGINT,
--       reserve  BIGINT,
--       auction_dateTime  TIMESTAMP(3),
--       expires  TIMESTAMP(3),
--       seller  BIGINT,
--       category  BIGINT,
--       auction_extra  VARCHAR
--   ) WITH (
--       'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q20
--   SELECT
--       auction, bidder, price, channel, url, B.`dateTime`, B.extra,
--       itemName, description, initialBid, reserve, A.`dateTime`, expires, seller, category, A.extra
--   FROM
--       bid AS B INNER JOIN auction AS A on B.auction = A.id
--   WHERE A.category = 10;
--
-- Sink columns: auction, bidder, price, channel, url, bid_datetime, bid_extra,
-- itemname, description, initialbid, reserve, auction_datetime, expires,
-- seller, category, auction_extra (timestamps as epoch milliseconds).
--
-- Batch translation: a regular inner equi-join of two append-only inputs
-- (both sides kept forever, a row emitted when the second side of a pair
-- arrives, nothing retracted or dropped, any arrival order): the end-of-input
-- result is the batch join, a bag with one row per (bid, auction) pair.  Bids
-- of an auction id that never appears produce nothing.
CREATE TEMP VIEW result AS
SELECT B.auction AS auction, B.bidder AS bidder, B.price AS price, B.channel AS channel,
       B.url AS url, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
       A.itemName AS itemName, A.description AS description, A.initialBid AS initialBid,
       A.reserve AS reserve, A.dateTime AS auction_dateTime, A.expires AS expires,
       A.seller AS seller, A.category AS category, A.extra AS auction_extra
  FROM bid AS B
  JOIN auction AS A ON B.auction = A.id
 WHERE A.category = 10;
