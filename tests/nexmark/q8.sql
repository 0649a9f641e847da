-- q8 — Monitor New Users: people who entered the system and created auctions
-- in the same 10 s period.
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q8.sql):
--
--   CREATE TABLE nexmark_q8 (
--     id  BIGINT,
--     name  VARCHAR,
--     stime  TIMESTAMP(3)
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q8
--   SELECT P.id, P.name, P.starttime
--   FROM (
--     SELECT id, name,
--           window_start AS starttime,
--           window_end AS endtime
--     FROM TABLE(
--               TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
--     GROUP BY id, name, window_start, window_end
--   ) P
--   JOIN (
--     SELECT seller,
--           window_start AS starttime,
--           window_end AS endtime
--     FROM TABLE(
--           TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
--     GROUP BY seller, window_start, window_end
--   ) A
--   ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
--
-- Sink columns: id, name, stime (the window start, epoch milliseconds).
--
-- P and A: TUMBLE(10 s) window aggregations by the event-time attribute
-- dateTime, aligned to the epoch: an event at t is in [start, start + 10000)
-- with start = floor(t / 10000) * 10000.  Late data: person.wm / auction.wm is
-- the watermark in force when the event arrives (the one stream watermark,
-- `dateTime - 4 s` over all events; oracle.sh).  A window fires once the
-- watermark reaches end - 1; an event arriving after that is dropped from it
-- (Flink: watermark >= windowEnd - 1).  Rule: a person (auction) counts iff
-- start + 10000 - 1 > wm.  At end of input every window fires.  Both sides are
-- GROUP BYs, so each is a set: one P row per (id, name, window), one A row per
-- (seller, window).
--
-- The join of the two fired window results (a window join in Flink, or a
-- regular one: the same rows meet either way, because each side's rows reach
-- the join before the watermark that fired them) is an inner equi-join on
-- (id = seller, same window); the end-of-input result is the batch join: one
-- row per person group whose id sold at least one counted auction in the same
-- window.
CREATE TEMP VIEW result AS
WITH
P AS (
  SELECT DISTINCT id, name, wstart
    FROM (SELECT id, name, wm, dateTime - ((dateTime % 10000) + 10000) % 10000 AS wstart
            FROM person)
   WHERE wstart + 9999 > wm),
A AS (
  SELECT DISTINCT seller, wstart
    FROM (SELECT seller, wm, dateTime - ((dateTime % 10000) + 10000) % 10000 AS wstart
            FROM auction)
   WHERE wstart + 9999 > wm)
SELECT P.id AS id, P.name AS name, P.wstart AS stime
  FROM P JOIN A ON P.id = A.seller AND P.wstart = A.wstart;
