"""Writing Hudi tables: creating them, and insert, upsert, delete, bulk_insert, insert_overwrite."""
