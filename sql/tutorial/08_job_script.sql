-- Step 2, as one SQL script: a loop over the control table where a table that fails to copy
-- is written to a log table and the job goes on with the others. Run it again and the copied
-- tables copy nothing new; a failed one is tried again.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

CREATE TABLE IF NOT EXISTS IDENTIFIER(catalog || '.' || schema || '.copy_failures') (
  source_table STRING,
  target_table STRING,
  failed_at    TIMESTAMP
);

BEGIN
  DECLARE copied INT DEFAULT 0;
  DECLARE failed INT DEFAULT 0;
  FOR row AS SELECT source_table, target_table, watermark_column
             FROM IDENTIFIER(catalog || '.' || schema || '.watermarks')
             ORDER BY source_table
  DO
    BEGIN
      DECLARE EXIT HANDLER FOR SQLEXCEPTION
        BEGIN
          INSERT INTO IDENTIFIER(catalog || '.' || schema || '.copy_failures')
            VALUES (row.source_table, row.target_table, current_timestamp());
          SET VAR failed = failed + 1;
        END;
      COPY INCREMENTAL FROM IDENTIFIER(row.source_table)
        INTO IDENTIFIER(row.target_table)
        WATERMARK IDENTIFIER(row.watermark_column)
        CONTROL TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks');
      SET VAR copied = copied + 1;
    END;
  END FOR;
  SELECT copied, failed;
END;
