-- q20: from the upstream Flink SQL quoted in tests/nexmark/q20.sql (its SELECT; the sink is ours)
-- columns: auction,bidder,price,channel,url,bid_datetime,bid_extra,itemname,description,initialbid,reserve,auction_datetime,expires,seller,category,auction_extra
SELECT
    auction, bidder, price, channel, url, B.`dateTime`, B.extra,
    itemName, description, initialBid, reserve, A.`dateTime`, expires, seller, category, A.extra
FROM
    bid AS B INNER JOIN auction AS A on B.auction = A.id
WHERE A.category = 10

