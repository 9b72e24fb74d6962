-- Every change to a report or its areas notifies channel shindo_reports
-- (stationdb.ReportsChannel) with the report's ID, at commit, so that each
-- core's data API pushes the report to its watchers (the edges' report
-- topic, DataService.WatchReports) as it happens, whichever core wrote it.
-- PostgreSQL folds identical notifications of one transaction into one: a
-- report stored with its areas notifies once. A TRUNCATE, which has no
-- rows, notifies an empty ID: read everything again.

CREATE FUNCTION reports_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('shindo_reports', '');
    ELSIF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('shindo_reports', NEW.id);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION report_areas_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('shindo_reports', '');
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('shindo_reports', OLD.report_id);
    ELSE
        PERFORM pg_notify('shindo_reports', NEW.report_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER reports_notify
    AFTER INSERT OR UPDATE ON reports
    FOR EACH ROW EXECUTE FUNCTION reports_notify();

CREATE TRIGGER report_areas_notify
    AFTER INSERT OR UPDATE OR DELETE ON report_areas
    FOR EACH ROW EXECUTE FUNCTION report_areas_notify();

CREATE TRIGGER reports_notify_truncate
    AFTER TRUNCATE ON reports
    FOR EACH STATEMENT EXECUTE FUNCTION reports_notify();

CREATE TRIGGER report_areas_notify_truncate
    AFTER TRUNCATE ON report_areas
    FOR EACH STATEMENT EXECUTE FUNCTION report_areas_notify();
