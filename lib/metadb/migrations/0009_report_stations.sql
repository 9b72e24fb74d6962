-- The stations' peak motion during the detection a report comes from: the
-- highest PGA, PGV and real-time intensity each station that felt it
-- (level 1 or more) sent between the detection's first trigger and its
-- end, from the core's snapshots (svc-dataapi/internal/detectsync). The
-- event service gives them as QuakeML amplitudes. Both cores' data APIs
-- write them for the same report, in any order: each value is kept at the
-- higher of the two. They are not part of the report's content hash (the
-- compatible routes do not show them).

CREATE TABLE report_stations (
    report_id  text NOT NULL REFERENCES reports (id) ON UPDATE CASCADE ON DELETE CASCADE,
    station_id text NOT NULL
               CONSTRAINT report_stations_station_valid
               CHECK (station_id <> '' AND octet_length(station_id) <= 64 AND station_id !~ '[[:cntrl:]]'),
    pga_gal    real NOT NULL CONSTRAINT report_stations_pga_range CHECK (pga_gal BETWEEN 0 AND 10000),
    pgv_cms    real NOT NULL CONSTRAINT report_stations_pgv_range CHECK (pgv_cms BETWEEN 0 AND 1000),
    intensity  real NOT NULL CONSTRAINT report_stations_intensity_range CHECK (intensity BETWEEN -12 AND 10),
    PRIMARY KEY (report_id, station_id)
);
