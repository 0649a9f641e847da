-- q19: from the upstream Flink SQL quoted in tests/nexmark/q19.sql (its SELECT; the sink is ours)
-- columns: auction,bidder,price,channel,url,datetime,extra,rank_number
SELECT * FROM
(SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid)
WHERE rank_number <= 10

