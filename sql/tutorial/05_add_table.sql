-- Extension: copy one more table. A row in the control table is all it takes; the hosts
-- table grows by joined_at instead of created_at.
DECLARE OR REPLACE VARIABLE catalog STRING DEFAULT 'main';
DECLARE OR REPLACE VARIABLE schema STRING DEFAULT 'config';

INSERT INTO IDENTIFIER(catalog || '.' || schema || '.watermarks') VALUES
  ('samples.wanderbricks.hosts', catalog || '.' || schema || '.hosts', 'joined_at', '1970-01-01');

COPY INCREMENTAL USING CONTROL TABLE IDENTIFIER(catalog || '.' || schema || '.watermarks');

SELECT count(*) AS hosts_copied FROM IDENTIFIER(catalog || '.' || schema || '.hosts');
