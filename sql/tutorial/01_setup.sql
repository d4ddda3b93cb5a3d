-- Step 1 of the tutorial: the watermark control table.
-- Every name is built from two variables with IDENTIFIER(), the Databricks way, so the
-- same script sets up any catalog/schema pair.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

CREATE SCHEMA IF NOT EXISTS IDENTIFIER(catalog || '.' || schema);

CREATE OR REPLACE TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks') (
  source_table     STRING    NOT NULL COMMENT 'table to copy from',
  target_table     STRING    NOT NULL COMMENT 'Delta table to copy into',
  watermark_column STRING    NOT NULL COMMENT 'column that grows as rows arrive',
  last_watermark   TIMESTAMP NOT NULL COMMENT 'highest value copied so far'
);

INSERT INTO IDENTIFIER(catalog || '.' || schema || '.watermarks') VALUES
  ('samples.wanderbricks.users',      catalog || '.' || schema || '.users',      'created_at', '1970-01-01'),
  ('samples.wanderbricks.properties', catalog || '.' || schema || '.properties', 'created_at', '1970-01-01');

SELECT source_table, target_table, watermark_column, last_watermark
FROM IDENTIFIER(catalog || '.' || schema || '.watermarks')
ORDER BY source_table;
