-- q11: from the upstream Flink SQL quoted in tests/nexmark/q11.sql (its SELECT; the sink is ours)
-- columns: bidder,bid_count,starttime,endtime
SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND)

