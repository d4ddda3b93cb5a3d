-- Step 3: check the job. Every target holds its source's rows, and every watermark equals
-- the newest value copied.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';
USE IDENTIFIER(catalog || '.' || schema);

SELECT 'users' AS copy,
       (SELECT count(*) FROM samples.wanderbricks.users) AS source_rows,
       (SELECT count(*) FROM users) AS target_rows,
       (SELECT max(created_at) FROM samples.wanderbricks.users) AS source_max,
       (SELECT last_watermark FROM watermarks WHERE source_table = 'samples.wanderbricks.users') AS watermark
UNION ALL
SELECT 'properties',
       (SELECT count(*) FROM samples.wanderbricks.properties),
       (SELECT count(*) FROM properties),
       (SELECT max(created_at) FROM samples.wanderbricks.properties),
       (SELECT last_watermark FROM watermarks WHERE source_table = 'samples.wanderbricks.properties')
ORDER BY copy;

-- Every run is in the history, with its watermark range.
SELECT source, target, previous_mark, new_mark, rows_copied, status
FROM system.tidemark.copy_runs
ORDER BY started_at;
