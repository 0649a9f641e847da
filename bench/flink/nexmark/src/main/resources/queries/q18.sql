-- q18: from the upstream Flink SQL quoted in tests/nexmark/q18.sql (its SELECT; the sink is ours)
-- columns: auction,bidder,price,channel,url,datetime,extra
SELECT auction, bidder, price, channel, url, `dateTime`, extra
 FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC) AS rank_number
       FROM bid)
 WHERE rank_number <= 1

