-- q7: from the upstream Flink SQL quoted in tests/nexmark/q7.sql (its SELECT; the sink is ours)
-- columns: auction,bidder,price,datetime,extra
SELECT B.auction, B.bidder, B.price, B.`dateTime`, B.extra  -- upstream lists price before bidder: see tests/nexmark/q7.sql
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as `dateTime`
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`

