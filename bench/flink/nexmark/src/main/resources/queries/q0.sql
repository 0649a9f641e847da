-- q0: the pass-through (Nexmark's q0): every bid, no state
-- columns: auction,bidder,price,datetime,extra
SELECT auction, bidder, price, `dateTime`, extra FROM bid
