-- q5 — Hot Items: which auctions have seen the most bids in the last period?
-- (HOP windows: size 10 s, slide 2 s.)
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q5.sql):
--
--   CREATE TABLE nexmark_q5 (
--     auction  BIGINT,
--     num  BIGINT
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q5
--   SELECT AuctionBids.auction, AuctionBids.num
--    FROM (
--      SELECT
--        auction,
--        count(*) AS num,
--        window_start AS starttime,
--        window_end AS endtime
--        FROM TABLE(
--                HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
--        GROUP BY auction, window_start, window_end
--    ) AS AuctionBids
--    JOIN (
--      SELECT
--        max(CountBids.num) AS maxn,
--        CountBids.starttime,
--        CountBids.endtime
--      FROM (
--        SELECT
--          count(*) AS num,
--          window_start AS starttime,
--          window_end AS endtime
--        FROM TABLE(
--                   HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
--        GROUP BY auction, window_start, window_end
--        ) AS CountBids
--      GROUP BY CountBids.starttime, CountBids.endtime
--    ) AS MaxBids
--    ON AuctionBids.starttime = MaxBids.starttime AND
--       AuctionBids.endtime = MaxBids.endtime AND
--       AuctionBids.num >= MaxBids.maxn;
--
-- Sink columns: auction, num.
--
-- Window assignment: HOP by the event-time attribute dateTime (epoch ms),
-- aligned to the epoch (offset 0): a bid at t belongs to the 5 windows
-- [s, s + 10000) with s a multiple of 2000 and s <= t < s + 10000; with
-- se = floor(t / 2000) * 2000 + 2000 (the end of t's 2 s slice) their ends
-- are se, se + 2000, ..., se + 8000.
--
-- Watermark and late data: the watermark is `dateTime - 4 s` over the whole
-- event stream (persons, auctions and bids alike); bid.wm is the watermark in
-- force when the bid arrives (events in seq order; see oracle.sh).  A window
-- [start, end) fires once the watermark reaches end - 1 (Flink:
-- isWindowFired: watermark >= windowEnd - 1); a bid arriving after that is
-- late for that window and its contribution is dropped, but it still counts in
-- its later windows that have not fired (Flink's slicing window operator adds
-- a late bid to its slice unless the slice's last window has fired, and fired
-- windows never see it).  Rule: a bid counts in window [end - 10000, end) iff
-- end - 1 > bid.wm.  At end of input the watermark goes to +infinity and
-- every window with at least one counted bid fires; windows with none do not
-- exist.
--
-- After the window aggregation, everything is exact on the fired rows: per
-- window, max(num) over its auctions; AuctionBids.num >= maxn keeps the
-- auctions whose count equals the window's max (ties: all of them).  The
-- result is a bag: the same (auction, num) appears once per window where it
-- is the max.  Whether Flink runs the outer aggregation/join as window
-- operators or as regular ones (updating, retracting), their input rows are
-- the same fired window rows, so the end-of-input result is this.
CREATE TEMP VIEW result AS
WITH
-- Per bid: its slice end se and k0, the first of its 5 windows (ends
-- se + 2000 * k, k = 0..4) it still counts in (5: none).
b AS (
  SELECT auction, se,
         CASE WHEN se - 1 > wm THEN 0
              WHEN se + 1999 > wm THEN 1
              WHEN se + 3999 > wm THEN 2
              WHEN se + 5999 > wm THEN 3
              WHEN se + 7999 > wm THEN 4
              ELSE 5 END AS k0
    FROM (SELECT auction, wm,
                 dateTime - ((dateTime % 2000) + 2000) % 2000 + 2000 AS se
            FROM bid)),
pre AS (SELECT auction, se, k0, count(*) AS n FROM b WHERE k0 < 5 GROUP BY auction, se, k0),
ks(k) AS (VALUES (0), (1), (2), (3), (4)),
counts AS (            -- AuctionBids: one row per (auction, window end)
  SELECT auction, se + 2000 * k AS wend, sum(n) AS num
    FROM pre JOIN ks ON ks.k >= pre.k0
   GROUP BY auction, wend),
maxes AS (SELECT wend, max(num) AS maxn FROM counts GROUP BY wend)
SELECT c.auction AS auction, c.num AS num
  FROM counts AS c JOIN maxes AS m ON m.wend = c.wend AND c.num >= m.maxn;
