-- The table examples/postgres-cdc.yaml captures, with rows for its initial snapshot.
-- `version` grows by one with each update, so the records show every key's changes
-- in order.
CREATE TABLE IF NOT EXISTS shop_orders (
  id bigint PRIMARY KEY,
  customer text NOT NULL,
  total numeric(10, 2) NOT NULL,
  status text NOT NULL DEFAULT 'new',
  version int NOT NULL DEFAULT 1
);
INSERT INTO shop_orders (id, customer, total)
  SELECT g, 'customer-' || (g % 17), g * 1.25 FROM generate_series(1, 1000) AS g
  ON CONFLICT DO NOTHING;
