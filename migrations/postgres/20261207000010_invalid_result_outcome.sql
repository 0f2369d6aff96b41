-- A completion whose result or error cannot be stored as sent (U+0000) ends its attempt
-- `invalid` and answers `invalid_result`; a repeat answers the same.
ALTER TABLE attempts DROP CONSTRAINT attempts_completion_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_completion_outcome_check
    CHECK (completion_outcome IN ('won', 'lost', 'recorded', 'contract_violation', 'invalid_result')) NOT VALID;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_completion_outcome_check;
