-- Stations and their signing keys (SPEC §3, §5).
--
-- The Go code validates every value first and explains what is wrong; these
-- constraints are the backstop for anything else that writes here (psql, a
-- future admin tool), so the registry every ingest node loads stays valid.

CREATE TABLE stations (
    id         text PRIMARY KEY
               CONSTRAINT stations_id_valid
               CHECK (id <> '' AND octet_length(id) <= 64 AND id !~ '[[:cntrl:]]'),
    name       text NOT NULL DEFAULT ''
               CONSTRAINT stations_name_valid CHECK (char_length(name) <= 200 AND name !~ '[[:cntrl:]]'),
    net        text NOT NULL DEFAULT ''
               CONSTRAINT stations_net_valid CHECK (char_length(net) <= 64 AND net !~ '[[:cntrl:]]'),
    -- NaN compares greater than every number in PostgreSQL, so BETWEEN
    -- refuses it too.
    lat        double precision NOT NULL CONSTRAINT stations_lat_range CHECK (lat BETWEEN -90 AND 90),
    lon        double precision NOT NULL CONSTRAINT stations_lon_range CHECK (lon BETWEEN -180 AND 180),
    -- Taiwan township postal code (SPEC §4); 0 when unknown.
    code       integer NOT NULL DEFAULT 0 CONSTRAINT stations_code_range CHECK (code >= 0),
    active     boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz,
    -- Retirement is one state, not two columns that could disagree.
    CONSTRAINT stations_retired_iff_inactive CHECK ((retired_at IS NULL) = active)
);

CREATE INDEX stations_net ON stations (net, id);

CREATE TABLE station_keys (
    station_id text NOT NULL REFERENCES stations (id) ON UPDATE CASCADE ON DELETE CASCADE,
    -- The wire protocol's key_id is a uint32.
    key_id     bigint NOT NULL CONSTRAINT station_keys_key_id_range CHECK (key_id BETWEEN 0 AND 4294967295),
    -- HMAC-SHA256 keys of 16 to 64 bytes, as registry.NewSet accepts.
    secret     bytea NOT NULL CONSTRAINT station_keys_secret_length CHECK (octet_length(secret) BETWEEN 16 AND 64),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- NULL for the current key; otherwise the end of a rotated-out key's
    -- overlap. Expired keys stay as a record of what signed what.
    not_after  timestamptz,
    PRIMARY KEY (station_id, key_id)
);

-- At most one current key per station.
CREATE UNIQUE INDEX station_keys_one_current ON station_keys (station_id) WHERE not_after IS NULL;
