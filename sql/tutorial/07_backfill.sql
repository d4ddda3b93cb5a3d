-- Extension: backfill. Setting a watermark back is honoured: the next run copies again every
-- row above it. Here users is rebuilt from 2025-01-01: its target first loses those rows, so
-- nothing ends up twice.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';
USE IDENTIFIER(catalog || '.' || schema);

DELETE FROM users WHERE created_at > '2025-01-01';

UPDATE watermarks SET last_watermark = '2025-01-01'
WHERE source_table = 'samples.wanderbricks.users';

COPY INCREMENTAL FROM samples.wanderbricks.users INTO users CONTROL TABLE watermarks;

SELECT (SELECT count(*) FROM users) = (SELECT count(*) FROM samples.wanderbricks.users) AS users_complete,
       (SELECT count(*) FROM (SELECT user_id FROM users GROUP BY user_id HAVING count(*) > 1)) AS duplicated_users;
