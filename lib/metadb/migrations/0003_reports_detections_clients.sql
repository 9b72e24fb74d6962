-- Earthquake reports, detections and API clients (SPEC §5, §7).
--
-- As for stations, Go validates first and explains; the CHECK constraints
-- are the backstop for anything else writing here. Event times are Unix
-- milliseconds (bigint), as on the wire, so that cursors and the two cores
-- agree to the millisecond; bookkeeping times are timestamptz.

-- Detections as svc-rts publishes them (rtsv1.Detection): one row per
-- detection, the update with the highest serial.
CREATE TABLE detections (
    id               text PRIMARY KEY
                     CONSTRAINT detections_id_valid
                     CHECK (id <> '' AND octet_length(id) <= 64 AND id !~ '[[:cntrl:]]'),
    serial           bigint NOT NULL CONSTRAINT detections_serial_range CHECK (serial BETWEEN 1 AND 4294967295),
    final            boolean NOT NULL,
    origin_time_ms   bigint NOT NULL,
    lat              double precision NOT NULL CONSTRAINT detections_lat_range CHECK (lat BETWEEN -90 AND 90),
    lon              double precision NOT NULL CONSTRAINT detections_lon_range CHECK (lon BETWEEN -180 AND 180),
    depth_km         double precision NOT NULL CONSTRAINT detections_depth_range CHECK (depth_km BETWEEN -10 AND 1000),
    magnitude        double precision NOT NULL CONSTRAINT detections_magnitude_range CHECK (magnitude BETWEEN -5 AND 12),
    location         text NOT NULL DEFAULT ''
                     CONSTRAINT detections_location_valid CHECK (char_length(location) <= 200 AND location !~ '[[:cntrl:]]'),
    location_code    integer NOT NULL DEFAULT 0 CONSTRAINT detections_location_code_range CHECK (location_code >= 0),
    max_level        smallint NOT NULL CONSTRAINT detections_max_level_range CHECK (max_level BETWEEN 0 AND 9),
    first_trigger_ms bigint NOT NULL,
    updated_ms       bigint NOT NULL,
    stations         integer NOT NULL DEFAULT 0 CONSTRAINT detections_stations_range CHECK (stations >= 0),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Newest first, the order of GET /v1/detections and its cursor.
CREATE INDEX detections_recent ON detections (first_trigger_ms DESC, id DESC);

-- Earthquake reports: posted by a writer, or derived from a final
-- detection (source_detection_id) by either core's data API.
CREATE TABLE reports (
    id                  text PRIMARY KEY
                        CONSTRAINT reports_id_valid
                        CHECK (id <> '' AND octet_length(id) <= 64 AND id ~ '^[A-Za-z0-9._:-]+$'),
    time_ms             bigint NOT NULL CONSTRAINT reports_time_range CHECK (time_ms BETWEEN 0 AND 253402300799999),
    lat                 double precision NOT NULL CONSTRAINT reports_lat_range CHECK (lat BETWEEN -90 AND 90),
    lon                 double precision NOT NULL CONSTRAINT reports_lon_range CHECK (lon BETWEEN -180 AND 180),
    depth_km            double precision NOT NULL CONSTRAINT reports_depth_range CHECK (depth_km BETWEEN 0 AND 1000),
    magnitude           double precision NOT NULL CONSTRAINT reports_magnitude_range CHECK (magnitude BETWEEN -5 AND 12),
    location            text NOT NULL DEFAULT ''
                        CONSTRAINT reports_location_valid CHECK (char_length(location) <= 200 AND location !~ '[[:cntrl:]]'),
    max_level           smallint NOT NULL CONSTRAINT reports_max_level_range CHECK (max_level BETWEEN 0 AND 9),
    -- MD5 of the report's canonical content (stationdb.Report.ContentHash):
    -- clients compare it to tell a changed report from a known one.
    md5                 text NOT NULL CONSTRAINT reports_md5_valid CHECK (md5 ~ '^[0-9a-f]{32}$'),
    -- The detection it was derived from; NULL for a posted report.
    source_detection_id text UNIQUE
                        CONSTRAINT reports_source_valid
                        CHECK (source_detection_id <> '' AND octet_length(source_detection_id) <= 64),
    -- First trigger of the source detection, Unix ms (the compatible
    -- routes' "trem"); 0 without one.
    trem_ms             bigint NOT NULL DEFAULT 0 CONSTRAINT reports_trem_range CHECK (trem_ms >= 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Newest first: the list order and its cursor (time_ms, id).
CREATE INDEX reports_recent ON reports (time_ms DESC, id DESC);

-- Per-area intensities of a report: township postal code → level.
CREATE TABLE report_areas (
    report_id text NOT NULL REFERENCES reports (id) ON UPDATE CASCADE ON DELETE CASCADE,
    code      integer NOT NULL CONSTRAINT report_areas_code_range CHECK (code BETWEEN 0 AND 999999),
    level     smallint NOT NULL CONSTRAINT report_areas_level_range CHECK (level BETWEEN 0 AND 9),
    PRIMARY KEY (report_id, code)
);

-- Clients of the data API holding keys. A key is "<key_id>.<secret>"; only
-- the SHA-256 of the secret is kept, so the table never holds a usable key.
CREATE TABLE api_clients (
    key_id      text PRIMARY KEY CONSTRAINT api_clients_key_id_valid CHECK (key_id ~ '^[a-z0-9_]{8,40}$'),
    secret_hash bytea NOT NULL CONSTRAINT api_clients_secret_hash_length CHECK (octet_length(secret_hash) = 32),
    name        text NOT NULL DEFAULT ''
                CONSTRAINT api_clients_name_valid CHECK (char_length(name) <= 200 AND name !~ '[[:cntrl:]]'),
    role        text NOT NULL CONSTRAINT api_clients_role_valid CHECK (role IN ('writer', 'admin')),
    -- Requests per second and burst of this key's token bucket; NULL: the
    -- service's defaults.
    rate_limit  double precision CONSTRAINT api_clients_rate_limit_range CHECK (rate_limit > 0 AND rate_limit <= 100000),
    rate_burst  integer CONSTRAINT api_clients_rate_burst_range CHECK (rate_burst BETWEEN 1 AND 1000000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- One version counter per kind of data, bumped in the same transaction as
-- every change: the data API derives its ETags from it, so a conditional
-- GET is answered from one primary-key read, and a version read is never
-- newer than the data the same reader can see.
CREATE TABLE data_versions (
    name    text PRIMARY KEY,
    version bigint NOT NULL DEFAULT 0
);
INSERT INTO data_versions (name) VALUES ('reports'), ('detections'), ('stations');

CREATE FUNCTION data_versions_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_versions SET version = version + 1 WHERE name = TG_ARGV[0];
    RETURN NULL;
END
$$;

-- Row-level, so that a statement changing nothing (an upsert that lost to
-- a newer serial) leaves the ETags alone.
CREATE TRIGGER reports_version AFTER INSERT OR UPDATE OR DELETE ON reports
    FOR EACH ROW EXECUTE FUNCTION data_versions_bump('reports');
CREATE TRIGGER report_areas_version AFTER INSERT OR UPDATE OR DELETE ON report_areas
    FOR EACH ROW EXECUTE FUNCTION data_versions_bump('reports');
CREATE TRIGGER detections_version AFTER INSERT OR UPDATE OR DELETE ON detections
    FOR EACH ROW EXECUTE FUNCTION data_versions_bump('detections');
CREATE TRIGGER stations_version AFTER INSERT OR UPDATE OR DELETE ON stations
    FOR EACH ROW EXECUTE FUNCTION data_versions_bump('stations');
CREATE TRIGGER reports_version_truncate AFTER TRUNCATE ON reports
    FOR EACH STATEMENT EXECUTE FUNCTION data_versions_bump('reports');
CREATE TRIGGER report_areas_version_truncate AFTER TRUNCATE ON report_areas
    FOR EACH STATEMENT EXECUTE FUNCTION data_versions_bump('reports');
CREATE TRIGGER detections_version_truncate AFTER TRUNCATE ON detections
    FOR EACH STATEMENT EXECUTE FUNCTION data_versions_bump('detections');
CREATE TRIGGER stations_version_truncate AFTER TRUNCATE ON stations
    FOR EACH STATEMENT EXECUTE FUNCTION data_versions_bump('stations');
