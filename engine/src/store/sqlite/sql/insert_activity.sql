-- Inserts an activity.
INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input,
    created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
