-- q3: from the upstream Flink SQL quoted in tests/nexmark/q3.sql (its SELECT; the sink is ours)
-- columns: name,city,state,id
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')

