-- Stations gain the moment an admin last reset their seq counter
-- (Store.ResetStationSeq): a station whose counter really restarted
-- (firmware reflashed, counter lost) would otherwise have every new packet
-- refused as a replay. NULL: never reset. The registry carries it to every
-- ingest (registry.Station.SeqResetMs), which forgets the station's replay
-- window and the journal records it received before that moment.
--
-- Setting it is an UPDATE of stations, so the existing row triggers fire
-- as for any change (0002: pg_notify on shindo_stations, every ingest
-- reloads; 0003: the stations data version, the ETags) and nothing new is
-- needed for that.
--
-- As elsewhere, Go validates first and explains; the constraint and the
-- trigger are the backstop for psql and other writers. registry.NewSet
-- refuses a reset time before 2020 or more than a day ahead of the clock,
-- and a registry that fails to load keeps every ingest on its previous
-- set, so such a value must never reach the table. A CHECK cannot read the
-- clock (it must hold whenever it is re-checked, a restore included),
-- hence the trigger for the upper bound.

ALTER TABLE stations
    ADD COLUMN seq_reset_at timestamptz
        -- Refuses -infinity and infinity too, which Go cannot represent.
        CONSTRAINT stations_seq_reset_range
        CHECK (seq_reset_at >= timestamptz '2020-01-01 00:00:00+00' AND seq_reset_at < timestamptz 'infinity');

CREATE FUNCTION stations_seq_reset_not_future() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq_reset_at > now() + interval '1 day' THEN
        RAISE EXCEPTION 'seq_reset_at % is more than a day in the future', NEW.seq_reset_at
            USING ERRCODE = 'check_violation', CONSTRAINT = 'stations_seq_reset_not_future',
                  TABLE = 'stations', COLUMN = 'seq_reset_at';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER stations_seq_reset_not_future
    BEFORE INSERT OR UPDATE OF seq_reset_at ON stations
    FOR EACH ROW EXECUTE FUNCTION stations_seq_reset_not_future();
