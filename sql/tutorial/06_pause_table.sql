-- Extension: pause a table without deleting its row. The job skips rows whose `active`
-- column is false. Existing rows read the column's DEFAULT.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

ALTER TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks') ADD COLUMN active BOOLEAN DEFAULT TRUE;

UPDATE IDENTIFIER(catalog || '.' || schema || '.watermarks')
SET active = FALSE
WHERE source_table = 'samples.wanderbricks.properties';

SELECT source_table, active
FROM IDENTIFIER(catalog || '.' || schema || '.watermarks')
ORDER BY source_table;

-- Only the active tables are copied (nothing new for them here).
COPY INCREMENTAL USING CONTROL TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks');
