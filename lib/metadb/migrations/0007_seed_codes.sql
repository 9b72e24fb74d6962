-- Stations gain their SEED codes — network, station, location — which name
-- their data everywhere: the archive's miniSEED records and SDS files,
-- exports, station metadata. Before this the archive chose them itself
-- from the id under its -network flag (default SH) and kept the choice
-- per core; the registry now owns them, so the two cores and every
-- reader share one name. `net` stays what it was: the label the compatible
-- routes show (apps compare it, e.g. "MS-Net"), not a SEED code.
--
-- Existing stations get the codes the archive has been giving them: network
-- SH, location 00, and the station code by seismo/seedcode.Station's rule,
-- repeated here in SQL (TestSEEDCodesMigrated and TestSEEDCodesDefault
-- hold the two together); so do stations inserted from now on without
-- codes. The archive applied the rule in the order it first saw
-- stations; here it is the order they were provisioned, which is the same
-- unless two ids collided on their last five letters and digits — then a
-- core's archive may hold the later one under another hashed code, and it
-- keeps that name for its files (svc-waveform logs it).
--
-- Codes are fixed once given, like the id: the trigger below refuses a
-- change. Go validates first and explains; the constraints are the
-- backstop for psql and other writers.

ALTER TABLE stations
    ADD COLUMN seed_net text,
    ADD COLUMN seed_sta text,
    ADD COLUMN seed_loc text NOT NULL DEFAULT '00';

-- seismo/seedcode.Station's rule 3: five base-36 digits of SHA-256 of the
-- id's UTF-8 bytes and a big-endian 64-bit counter, least significant
-- digit first.
CREATE FUNCTION seed_hashed_station(id text, salt bigint) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    digest bytea := sha256(convert_to(id, 'UTF8') || int8send(salt));
    v      numeric := 0;
    code   text := '';
BEGIN
    FOR i IN 0..7 LOOP
        v := v * 256 + get_byte(digest, i);
    END LOOP;
    FOR j IN 1..5 LOOP
        code := code || substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ', mod(v, 36)::int + 1, 1);
        v := div(v, 36);
    END LOOP;
    RETURN code;
END
$$;

-- The whole rule: an id that is a code keeps it, else its last five
-- letters and digits, upper-cased (upper() of ASCII; Go's also maps a few
-- other letters, such as the dotless ı, to ASCII ones — ids like that are
-- not in use), else the hashed code free in the network.
CREATE FUNCTION seed_station_code(station_id text, network text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    cand text := upper(station_id);
    n    bigint := 0;
BEGIN
    IF cand !~ '^[A-Z0-9]{1,5}$' THEN
        cand := right(regexp_replace(cand, '[^A-Z0-9]', '', 'g'), 5);
    END IF;
    WHILE cand = '' OR EXISTS (SELECT 1 FROM stations s WHERE s.seed_net = network AND s.seed_sta = cand) LOOP
        cand := seed_hashed_station(station_id, n);
        n := n + 1;
    END LOOP;
    RETURN cand;
END
$$;

DO $$
DECLARE
    s record;
BEGIN
    FOR s IN SELECT id FROM stations ORDER BY created_at, id LOOP
        UPDATE stations SET seed_net = 'SH', seed_sta = seed_station_code(s.id, 'SH') WHERE id = s.id;
    END LOOP;
END
$$;

-- A station inserted without codes gets them by the same rule: network
-- SH, location 00 (lib/metadb.Store.CreateStation leaves them to this when
-- it is given none, as psql may).
CREATE FUNCTION stations_seed_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.seed_net := coalesce(NEW.seed_net, 'SH');
    NEW.seed_loc := coalesce(NEW.seed_loc, '00');
    IF NEW.seed_sta IS NULL THEN
        NEW.seed_sta := seed_station_code(NEW.id, NEW.seed_net);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER stations_seed_default
    BEFORE INSERT ON stations
    FOR EACH ROW EXECUTE FUNCTION stations_seed_default();

ALTER TABLE stations
    ALTER COLUMN seed_net SET NOT NULL,
    ALTER COLUMN seed_sta SET NOT NULL,
    ADD CONSTRAINT stations_seed_net_valid CHECK (seed_net ~ '^[A-Z0-9]{1,2}$'),
    ADD CONSTRAINT stations_seed_sta_valid CHECK (seed_sta ~ '^[A-Z0-9]{1,5}$'),
    ADD CONSTRAINT stations_seed_loc_valid CHECK (seed_loc ~ '^[A-Z0-9]{0,2}$');

-- One station per network and station code, retired ones included: a
-- retired station's data stays in the archive under its name.
CREATE UNIQUE INDEX stations_seed_codes ON stations (seed_net, seed_sta);

CREATE FUNCTION stations_seed_codes_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.seed_net, NEW.seed_sta, NEW.seed_loc) IS DISTINCT FROM (OLD.seed_net, OLD.seed_sta, OLD.seed_loc) THEN
        RAISE EXCEPTION 'the SEED codes of station % are fixed', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'stations_seed_codes_fixed', TABLE = 'stations';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER stations_seed_codes_fixed
    BEFORE UPDATE OF seed_net, seed_sta, seed_loc ON stations
    FOR EACH ROW EXECUTE FUNCTION stations_seed_codes_fixed();
