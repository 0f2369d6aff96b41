-- Inserts an activity.
INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options,
                        task_queue, input)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
