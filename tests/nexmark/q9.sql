-- q9 — Winning Bids: the winning bid of each auction.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q9.sql):
--
--   CREATE TABLE nexmark_q9 (
--     id  BIGINT,
--     itemName  VARCHAR,
--     description  VARCHAR,
--     initialBid  BIGINT,
--     reserve  BIGINT,
--     `dateTime`  TIMESTAMP(3),
--     expires  TIMESTAMP(3),
--     seller  BIGINT,
--     category  BIGINT,
--     extra  VARCHAR,
--     auction  BIGINT,
--     bidder  BIGINT,
--     price  BIGINT,
--     bid_dateTime  TIMESTAMP(3),
--     bid_extra  VARCHAR
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q9
--   SELECT
--       id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category, extra,
--       auction, bidder, price, bid_dateTime, bid_extra
--   FROM (
--      SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
--        ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC) AS rownum
--      FROM auction A, bid B
--      WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
--   )
--   WHERE rownum <= 1;
--
-- Sink columns: id, itemname, description, initialbid, reserve, datetime,
-- expires, seller, category, extra, auction, bidder, price, bid_datetime,
-- bid_extra (timestamps as epoch milliseconds).
--
-- Batch translation: the join is a regular inner join (A.id = B.auction plus a
-- residual condition on plain values; nothing expires or is dropped, every
-- event counts whatever its arrival order; BETWEEN includes both ends).  The
-- ROW_NUMBER ... <= 1 over it is Flink's retracting Top-1 (rank) operator: at
-- end of input each auction with at least one qualifying bid holds exactly its
-- first row in the ORDER BY.  Ties: Flink's rank keeps rows with equal sort keys
-- in arrival order, so among bids with the same price and dateTime the one that
-- arrived first (lowest seq) wins.  Order used: price DESC, dateTime ASC,
-- seq ASC.
CREATE TEMP VIEW result AS
SELECT id, itemName, description, initialBid, reserve, dateTime, expires, seller,
       category, extra, auction, bidder, price, bid_dateTime, bid_extra
  FROM (SELECT A.id, A.itemName, A.description, A.initialBid, A.reserve, A.dateTime,
               A.expires, A.seller, A.category, A.extra,
               B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime,
               B.extra AS bid_extra,
               row_number() OVER (PARTITION BY A.id
                                  ORDER BY B.price DESC, B.dateTime ASC, B.seq ASC) AS rownum
          FROM auction AS A
          JOIN bid AS B ON A.id = B.auction
                       AND B.dateTime BETWEEN A.dateTime AND A.expires)
 WHERE rownum <= 1;
