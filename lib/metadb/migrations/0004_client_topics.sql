-- API clients gain the topics they may subscribe to at the edges'
-- WebSocket API, and the role "subscriber": a key that may subscribe to
-- its topics and do nothing else. An admin may subscribe to every topic
-- whatever its list says (the services decide that, not this table).
--
-- As elsewhere, Go validates, deduplicates and sorts first and explains;
-- the CHECK constraints are the backstop.

-- A topic is 1 to 64 of a-z, 0-9, '.', '_' and '-', or "*" for every
-- topic. A CHECK cannot look into an array by itself, hence a function;
-- NULL elements are refused too.
CREATE FUNCTION api_client_topics_valid(topics text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT NOT EXISTS (
        SELECT 1 FROM unnest(topics) AS t
        WHERE t IS NULL OR NOT (t = '*' OR t ~ '^[a-z0-9._-]{1,64}$')
    )
$$;

ALTER TABLE api_clients
    DROP CONSTRAINT api_clients_role_valid,
    ADD CONSTRAINT api_clients_role_valid CHECK (role IN ('writer', 'admin', 'subscriber')),
    -- At most 32 topics in a flat list; existing clients get none.
    ADD COLUMN topics text[] NOT NULL DEFAULT '{}'
        CONSTRAINT api_clients_topics_valid CHECK (
            cardinality(topics) <= 32
            AND coalesce(array_ndims(topics), 1) = 1
            AND api_client_topics_valid(topics)
        );
