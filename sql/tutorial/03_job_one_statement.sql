-- Step 2, the short way: the whole job is one statement. Running it again copies nothing
-- new; rows that arrive later are copied by the next run.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

COPY INCREMENTAL USING CONTROL TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks') CONCURRENCY 4;
