-- q11 — User Sessions: how many bids did a user make in each session they were
-- active?  (Session windows, gap 10 s.)
--
-- Flink SQL (nexmark/nexmark, nexmark-flink/src/main/resources/queries/q11.sql):
--
--   CREATE TABLE nexmark_q11 (
--     bidder BIGINT,
--     bid_count BIGINT,
--     starttime TIMESTAMP(3),
--     endtime TIMESTAMP(3)
--   ) WITH (
--     'connector' = 'blackhole'
--   );
--
--   INSERT INTO nexmark_q11
--   SELECT
--       B.bidder,
--       count(*) as bid_count,
--       SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) as starttime,
--       SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) as endtime
--   FROM bid B
--   GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND);
--
-- Sink columns: bidder, bid_count, starttime, endtime (epoch milliseconds).
--
-- Semantics (Flink's group-window WindowOperator with merging session
-- windows, event time, allowed lateness 0), per bidder, events in arrival
-- (seq) order, G = 10000 ms, wm = bid.wm (the watermark in force when the bid
-- arrives: max dateTime of all earlier events of any kind - 4000; oracle.sh):
--
--   1. Before a bid is processed, every live session [start, end) of its bidder
--      with end - 1 <= wm has fired: it is emitted (bidder, count, start, end)
--      and forgotten (its cleanup timer at end - 1 fires with the trigger).
--   2. The bid's own window is [t, t + G).  It merges with every live session
--      it intersects, with Flink's TimeWindow.intersects, inclusive at both
--      ends: start <= t + G and end >= t (so bids exactly G apart share a
--      session).  The merged session covers them all (min start, max end,
--      counts added).
--   3. If it intersects no live session and t + G - 1 <= wm, its window is
--      already late (isWindowLate: maxTimestamp <= watermark): the bid is
--      dropped.  Otherwise it is counted (a merged window is never late: it
--      contains a live one).
--   4. At end of input the watermark goes to +infinity: every live session
--      fires.
--   So SESSION_START is the first bid time of a session and SESSION_END the
--   last bid time + G.  A session that fired is never reopened: a later bid
--   that would have joined it starts a new session, which may overlap it.
--
-- Implementation: a bidder is "regular" when, in seq order, its bid times never
-- decrease, no bid that starts a new session (first bid, or gap > G) is late
-- (t + G - 1 <= wm), and no bid that continues one (gap <= G) finds it fired
-- (previous t + G - 1 <= wm).  For a regular bidder the rules above reduce to
-- the batch gaps-and-islands: sessions are the maximal runs with gaps <= G
-- (proof: older sessions end before the current one starts and times only
-- grow, so a bid can only meet the current session, which is still live by the
-- third condition; a new session is never dropped by the second).  Every other
-- bidder goes through an event-by-event simulation of rules 1-4 (a recursive
-- CTE whose state is the JSON list of live [start, end, count] sessions; an
-- end-of-input sentinel event with wm = +infinity fires what is left).  With
-- the parameter @simulate_all = 1 (oracle.sh: SFS_ORACLE_SIMULATE_ALL=1) every
-- bidder is simulated, which checks the fast path against the simulation.
CREATE TEMP TABLE q11_ev AS
SELECT bidder, seq, dateTime AS t, wm,
       row_number() OVER w AS k,
       lag(dateTime) OVER w AS pt
  FROM bid
WINDOW w AS (PARTITION BY bidder ORDER BY seq);

CREATE TEMP TABLE q11_sim_bidders(bidder INTEGER PRIMARY KEY);
INSERT INTO q11_sim_bidders
SELECT DISTINCT bidder FROM q11_ev
 WHERE coalesce(@simulate_all, 0) = 1
    OR (pt IS NOT NULL AND t < pt)                                    -- time goes back
    OR ((pt IS NULL OR t - pt > 10000) AND t + 9999 <= wm)            -- new session, late
    OR (pt IS NOT NULL AND t - pt BETWEEN 0 AND 10000 AND pt + 9999 <= wm); -- continues a fired one

-- The simulated bidders' events, then one end-of-input sentinel each.
CREATE TEMP TABLE q11_simev(bidder INTEGER, k INTEGER, t INTEGER, wm INTEGER,
                            PRIMARY KEY (bidder, k)) WITHOUT ROWID;
INSERT INTO q11_simev
SELECT e.bidder, e.k, e.t, e.wm FROM q11_ev AS e JOIN q11_sim_bidders USING (bidder);
INSERT INTO q11_simev
SELECT bidder, max(k) + 1, 0, 9223372036854775807 FROM q11_simev GROUP BY bidder;

-- sim(bidder, k, live, fired): after the bidder's k-th event, its live sessions
-- and the sessions that fired just before that event (JSON [[start, end,
-- count], ...]).
CREATE TEMP TABLE q11_simulated AS
WITH RECURSIVE sim(bidder, k, live, fired) AS (
  SELECT bidder, 0, '[]', '[]' FROM q11_sim_bidders
  UNION ALL
  SELECT e.bidder, e.k,
         -- rule 1-3: the live sessions after this event
         (SELECT json_group_array(json_array(s0, e0, c0)) FROM (
            -- live, not fired, not touched by this bid
            SELECT (j.value ->> 0) AS s0, (j.value ->> 1) AS e0, (j.value ->> 2) AS c0
              FROM json_each(sim.live) AS j
             WHERE (j.value ->> 1) - 1 > e.wm
               AND NOT ((j.value ->> 0) <= e.t + 10000 AND (j.value ->> 1) >= e.t)
            UNION ALL
            -- the bid's window merged with the live sessions it intersects,
            -- unless it intersects none and is late
            SELECT min(e.t, coalesce(min(j.value ->> 0), e.t)),
                   max(e.t + 10000, coalesce(max(j.value ->> 1), e.t + 10000)),
                   1 + coalesce(sum(j.value ->> 2), 0)
              FROM json_each(sim.live) AS j
             WHERE (j.value ->> 1) - 1 > e.wm
               AND (j.value ->> 0) <= e.t + 10000 AND (j.value ->> 1) >= e.t
            HAVING count(*) > 0 OR e.t + 9999 > e.wm)),
         -- rule 1: fired before this event
         (SELECT json_group_array(json(j.value))
            FROM json_each(sim.live) AS j
           WHERE (j.value ->> 1) - 1 <= e.wm)
    FROM sim
    JOIN q11_simev AS e ON e.bidder = sim.bidder AND e.k = sim.k + 1)
SELECT sim.bidder AS bidder, (f.value ->> 2) AS bid_count,
       (f.value ->> 0) AS starttime, (f.value ->> 1) AS endtime
  FROM sim, json_each(sim.fired) AS f;

CREATE TEMP VIEW result AS
SELECT bidder, count(*) AS bid_count, min(t) AS starttime, max(t) + 10000 AS endtime
  FROM (SELECT bidder, t,
               sum(CASE WHEN pt IS NULL OR t - pt > 10000 THEN 1 ELSE 0 END)
                 OVER (PARTITION BY bidder ORDER BY seq ROWS UNBOUNDED PRECEDING) AS island
          FROM q11_ev
         WHERE bidder NOT IN (SELECT bidder FROM q11_sim_bidders))
 GROUP BY bidder, island
UNION ALL
SELECT bidder, bid_count, starttime, endtime FROM q11_simulated;
