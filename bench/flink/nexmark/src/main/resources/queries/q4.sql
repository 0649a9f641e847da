-- q4: from the upstream Flink SQL quoted in tests/nexmark/q4.sql (its SELECT; the sink is ours)
-- columns: id,final
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category

