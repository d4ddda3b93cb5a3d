-- Step 2: the copy job, as an explicit loop over the control table.
-- Each row's copy reads its watermark from the control table, copies the newer rows and
-- advances the watermark, exactly once, up to 4 tables at a time.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

FOR EACH row IN (SELECT * FROM IDENTIFIER(catalog || '.' || schema || '.watermarks')) CONCURRENCY 4
DO
  COPY INCREMENTAL FROM IDENTIFIER(row.source_table)
    INTO IDENTIFIER(row.target_table)
    WATERMARK IDENTIFIER(row.watermark_column)
    CONTROL TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks');
END FOR;
