-- Every change to a station or its keys notifies channel shindo_stations
-- with the station's ID, at commit, so that ingest nodes reload their
-- registry without a restart. PostgreSQL folds identical notifications of
-- one transaction into one. A TRUNCATE, which has no rows, notifies an
-- empty ID: everything changed.

CREATE FUNCTION stations_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('shindo_stations', '');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('shindo_stations', OLD.id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('shindo_stations', NEW.id);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION station_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('shindo_stations', '');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('shindo_stations', OLD.station_id);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('shindo_stations', NEW.station_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER stations_notify
    AFTER INSERT OR UPDATE OR DELETE ON stations
    FOR EACH ROW EXECUTE FUNCTION stations_notify();

CREATE TRIGGER station_keys_notify
    AFTER INSERT OR UPDATE OR DELETE ON station_keys
    FOR EACH ROW EXECUTE FUNCTION station_keys_notify();

CREATE TRIGGER stations_notify_truncate
    AFTER TRUNCATE ON stations
    FOR EACH STATEMENT EXECUTE FUNCTION stations_notify();

CREATE TRIGGER station_keys_notify_truncate
    AFTER TRUNCATE ON station_keys
    FOR EACH STATEMENT EXECUTE FUNCTION station_keys_notify();
