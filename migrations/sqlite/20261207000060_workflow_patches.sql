-- Workflow versioning (docs/workflows.md, "Deploying changed workflow code"): the patch
-- markers a workflow job recorded (`ctx.patched`, `ctx.deprecate_patch`), one per
-- (job, patch id). A marker takes no position: patches never shift the positions of a
-- job's steps. `deprecated` says the marker was recorded by `ctx.deprecate_patch`.
CREATE TABLE workflow_patches (
    owner_id    TEXT    NOT NULL,
    job_id      TEXT    NOT NULL,
    patch_id    TEXT    NOT NULL CHECK (length(patch_id) BETWEEN 1 AND 200),
    deprecated  INTEGER NOT NULL DEFAULT 0,
    recorded_at INTEGER NOT NULL,
    -- A job records a patch once.
    PRIMARY KEY (owner_id, job_id, patch_id),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);
