-- Stations gain what their StationXML reports beside the position: the
-- elevation above sea level, and the size of one count of the
-- accelerometer (counts × scale_gal = gal), from which the channels'
-- sensitivity follows (svc-dataapi/internal/fdsnstation). Existing
-- stations get elevation 0 and the scale the fleet's stations send
-- (seismo/measure.DefaultScaleGal); lib/registry applies the same bounds.

ALTER TABLE stations
    ADD COLUMN elevation_m double precision NOT NULL DEFAULT 0
        CONSTRAINT stations_elevation_range CHECK (elevation_m BETWEEN -12000 AND 9000),
    ADD COLUMN scale_gal double precision NOT NULL DEFAULT 0.001
        CONSTRAINT stations_scale_range CHECK (scale_gal > 0 AND scale_gal <= 100);
