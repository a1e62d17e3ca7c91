-- How a cold start began: process (a new interpreter) or pool (a warm-pool process).
ALTER TABLE invocations ADD COLUMN cold_start_kind TEXT;
