-- Retention (`--retention`) deletes a schedule's events older than the retention, as it
-- deletes finished jobs: this index finds them oldest first without reading the rest.
CREATE INDEX schedule_events_by_time ON schedule_events (at);
