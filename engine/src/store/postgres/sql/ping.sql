-- Answers when the database answers.
SELECT 1
