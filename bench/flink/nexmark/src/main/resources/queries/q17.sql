-- q17: from the upstream Flink SQL quoted in tests/nexmark/q17.sql (its SELECT; the sink is ours)
-- columns: auction,day,total_bids,rank1_bids,rank2_bids,rank3_bids,min_price,max_price,avg_price,sum_price
SELECT
     auction,
     DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') as `day`,
     count(*) AS total_bids,
     count(*) filter (where price < 10000) AS rank1_bids,
     count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
     count(*) filter (where price >= 1000000) AS rank3_bids,
     min(price) AS min_price,
     max(price) AS max_price,
     avg(price) AS avg_price,
     sum(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd')

